// Test program for netprobe-core/tests/dotnet_runtimes.rs: runs a workload that makes the runtime
// bind many precompiled (ReadyToRun) framework methods, prints READY, and waits for a line on
// stdin so the test can read /proc/PID/maps and /proc/PID/mem while the images are mapped.
// Compiled with Debian's mcs; runs on .NET 8 and .NET Core 3.1 (IL only, framework code is R2R).
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Text;
using System.Threading;

static class Exercise
{
    static int Work(int n)
    {
        var sb = new StringBuilder();
        var d = new Dictionary<string, int>();
        var l = new List<int>();
        var hs = new HashSet<string>();
        for (int i = 0; i < n; i++)
        {
            sb.Append(i).Append(',');
            d["k" + i] = i;
            l.Add(i * 3 % 17);
            hs.Add(i.ToString(CultureInfo.InvariantCulture));
        }
        l.Sort();
        l.Reverse();
        string s = sb.ToString();
        string[] parts = s.Split(',');
        int sum = parts.Where(p => p.Length > 0).Select(int.Parse).Sum();
        sum += parts.OrderBy(p => p).Take(3).Count() + d.Keys.Max().Length + hs.Count;
        try { throw new InvalidOperationException("x" + sum); }
        catch (Exception e) { sum += e.Message.Length; }
        finally { sum += 1; }
        sum += string.Join("|", l.Take(5)).Length + s.ToUpperInvariant().Length + DateTime.UtcNow.Year;
        sum += Math.Max(n, 3) + (int)Math.Sqrt(n) + Guid.NewGuid().ToString().Length;
        sum += string.Format("{0} {1:X} {2:F2}", "a", n, 1.5).Length + "héllo wörld ✓".IndexOf('w');
        sum += Encoding.UTF8.GetBytes("héllo").Length + Convert.ToBase64String(new byte[] { 1, 2, 3 }).Length;
        sum += new StringReader("a\nb\nc").ReadToEnd().Length + Path.Combine("a", "b").Length;
        return sum;
    }

    static int Main()
    {
        int r = 0;
        for (int i = 0; i < 5; i++) { r += Work(200); Thread.Sleep(1); }
        Console.WriteLine("READY " + r + " " + Environment.Version);
        Console.Out.Flush();
        Console.ReadLine();
        return 0;
    }
}
