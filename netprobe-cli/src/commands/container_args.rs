//! `--container`, `--pod` and `--selector`: which containers' processes a command targets, as
//! every command that takes `-p` accepts them.

use netprobe_core::containers::kubernetes::{LabelSelector, PodRef};
use netprobe_core::containers::Selection;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ContainerArgs {
    /// The processes of this container (Docker, containerd or Podman; a name, an id or unique id
    /// prefix, or containerd's NAMESPACE/ID), as if each were given with -p.
    #[arg(long, value_name = "NAME|ID", conflicts_with_all = ["pod", "selector"])]
    pub container: Option<String>,
    /// The processes of every container of this Kubernetes pod on this node (the labels the
    /// kubelet gives its containers), as if each were given with -p.
    #[arg(long, value_name = "[NAMESPACE/]NAME", value_parser = PodRef::parse, conflicts_with = "selector")]
    pub pod: Option<PodRef>,
    /// The processes of every container whose labels match this selector (kubectl's -l syntax:
    /// app=checkout,tier!=db, env in (prod,staging), !canary), as if each were given with -p.
    #[arg(short = 'l', long, value_name = "SELECTOR", value_parser = LabelSelector::parse)]
    pub selector: Option<LabelSelector>,
}

impl ContainerArgs {
    /// The containers chosen, if any.
    pub fn selection(self) -> Option<Selection> {
        match (self.container, self.pod, self.selector) {
            (Some(c), _, _) => Some(Selection::Container(c)),
            (None, Some(p), _) => Some(Selection::Pod(p)),
            (None, None, Some(s)) => Some(Selection::Labels(s)),
            (None, None, None) => None,
        }
    }
}
