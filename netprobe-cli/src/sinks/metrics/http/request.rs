//! The request head (RFC 9112 sections 2.1, 3 and 5): where it ends, and the three things the
//! server looks at in it: method, path and the `Authorization` field.

/// The end of a request head (RFC 9112 section 2.1: the empty line after the header fields).
pub(super) fn head_end(head: &[u8]) -> Option<usize> {
    head.windows(4).position(|w| w == b"\r\n\r\n")
}

/// The parts of a request head the server looks at.
pub(super) struct Head<'a> {
    pub(super) method: &'a str,
    pub(super) path: &'a str,
    pub(super) authorization: Option<&'a str>,
}

/// Parses a complete request head (RFC 9112 sections 3 and 5); `None` when it is not HTTP/1.x.
pub(super) fn parse_head(head: &[u8]) -> Option<Head<'_>> {
    let text = std::str::from_utf8(&head[..head_end(head)?]).ok()?;
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, target, version) = (
        request_line.next()?,
        request_line.next()?,
        request_line.next()?,
    );
    if !version.starts_with("HTTP/1.") || request_line.next().is_some() {
        return None;
    }
    let authorization = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        .map(|(_, value)| value.trim());
    Some(Head {
        method,
        path: target.split('?').next().unwrap_or(""),
        authorization,
    })
}
