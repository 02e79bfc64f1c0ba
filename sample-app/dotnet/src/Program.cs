// The .NET sample service of netprobe (after joe-elliott/sample-netcore-app, the app the hand
// recipes of joe-elliott/netcore-debugging-tools trace): an HTTP service with Echo and Fibonacci providers, plus modes that call precompiled
// (ReadyToRun) framework methods a known number of times with known arguments, for tracing tests.
//
// Builds with Debian's mcs (`mcs -out:sample-netcore-app.dll src/*.cs`, IL only: the app's own
// methods are JIT-compiled, the framework's are R2R) and with the .NET SDK
// (`dotnet publish -c Release -p:PublishReadyToRun=true`, app methods R2R too). See README.md.
using System;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Reflection;
using System.Text;
using System.Threading;
using sample_netcore_app.Providers;

namespace sample_netcore_app
{
    public class Program
    {
        const string Usage =
@"usage: sample-netcore-app MODE [options]
modes:
  serve    [--port 8080] [--max-requests N]
           HTTP/1.1 on 127.0.0.1: GET /echo/{value}, GET /fibonacci/{n}, GET /health
  sleep    [--count 10] [--ms 100] [--call direct|delegate|reflection] [--gc]
           calls System.Threading.Thread.Sleep(int32) --count times with --ms; --gc runs
           garbage collections on another thread meanwhile (stack walks during the calls)
  strings  [--count 10] [--call direct|delegate|reflection] [--value S]...
           calls System.String.Replace(string,string) on each value (default: an ASCII,
           a non-ASCII and a 100-char string): this = value, oldValue = ""needle"", newValue = value
  dates    [--count 10] [--call direct|reflection]
           constructs System.DateTime(int32 x7) with year 2000+i, month 1+i%12, day 1+i%28,
           hour i%24, minute i%60, second 7i%60, millisecond 13i%1000 for i in 1..count
           (eight integer arguments with `this`: the last two on the stack)
  empty    [--count 10] [--value S]...
           calls System.String.IsNullOrEmpty(string) through reflection (a direct call is
           inlined) on each value (default: ""np-empty-1"", """" and ""np-empty-ü✓""), --count rounds
  spin     [--ms 100] [--report-ms N]
           CPU-bound for --ms: SpinLoop calls System.String.Replace(string,string) on a
           4000-char string holding ""needle"" 100 times, in a loop (for profiles); with
           --report-ms, prints 'rate t_ms=T calls=C ms=M cpu_ms=P' every N ms (throughput;
           P: the process's CPU time over those M ms)
  jit      [--count 10] [--methods 1000]
           JIT-heavy: --count rounds, each compiling --methods new DynamicMethods (every one
           JIT-compiled on its first call) and printing 'jit round=R methods=N ms=M cpu_ms=P'
  waits    [--ms 100]
           blocked for --ms on two threads: SleepWaiter calls Thread.Sleep(20) in a loop,
           MonitorWaiter waits in Monitor.Wait on an object the main thread pulses every
           50 ms (for off-CPU profiles)
  echo     VALUE...   calls EchoProvider.calculateEchoValue(string) once per value
  fib      N...       calls FibonacciProvider.calculateFibonacciValue(int32) once per value
common options:
  --wait          print READY and wait for a line on stdin before starting (attach tracers first)
  --delay-ms N    sleep N ms before starting (no stdin needed)
Every mode prints 'pid=PID mode=MODE' first and one line per call with the exact arguments.";

        public static int Main(string[] args)
        {
            if (args.Length == 0 || args[0] == "-h" || args[0] == "--help")
            {
                Console.WriteLine(Usage);
                return args.Length == 0 ? 2 : 0;
            }
            var opts = new Options(args);
            Console.WriteLine("pid=" + System.Diagnostics.Process.GetCurrentProcess().Id + " mode=" + opts.Mode +
                              " runtime=" + Environment.Version);
            if (opts.Wait)
            {
                Console.WriteLine("READY");
                Console.Out.Flush();
                Console.In.ReadLine();
            }
            if (opts.DelayMs > 0) Thread.Sleep(opts.DelayMs);
            switch (opts.Mode)
            {
                case "serve": return new Server(new EchoProvider(), new FibonacciProvider()).Run(opts.Port, opts.MaxRequests);
                case "sleep": return SleepMode(opts);
                case "strings": return StringsMode(opts);
                case "dates": return DatesMode(opts);
                case "spin": return SpinMode(opts);
                case "jit": return JitMode(opts);
                case "waits": return WaitsMode(opts);
                case "empty": return EmptyMode(opts);
                case "echo":
                    foreach (var v in opts.Values) Console.WriteLine("echo " + new EchoProvider().calculateEchoValue(v));
                    return 0;
                case "fib":
                    foreach (var v in opts.Values)
                        Console.WriteLine("fib " + v + " = " + new FibonacciProvider().calculateFibonacciValue(int.Parse(v)));
                    return 0;
                default:
                    Console.Error.WriteLine("unknown mode '" + opts.Mode + "'\n" + Usage);
                    return 2;
            }
        }

        // Thread.Sleep(int32) is tiny (IL 7 bytes on 3.1, 19 on 8): a direct call from JIT-compiled
        // code may be inlined, and an inlined call never hits a probe. `delegate` and `reflection`
        // call the precompiled entry point itself.
        static int SleepMode(Options o)
        {
            var collector = o.Gc ? StartCollector() : null;
            Action<int> viaDelegate = Thread.Sleep;
            MethodInfo viaReflection = typeof(Thread).GetMethod("Sleep", new[] { typeof(int) });
            for (int i = 0; i < o.Count; i++)
            {
                Console.WriteLine("call " + (i + 1) + "/" + o.Count + " Thread.Sleep(" + o.Ms + ") via " + o.Call);
                switch (o.Call)
                {
                    case "direct": Thread.Sleep(o.Ms); break;
                    case "delegate": viaDelegate(o.Ms); break;
                    default: viaReflection.Invoke(null, new object[] { o.Ms }); break;
                }
            }
            if (collector != null)
            {
                stopCollector = true;
                collector.Join();
                Console.WriteLine("collections=" + GC.CollectionCount(2));
            }
            Console.WriteLine("done calls=" + o.Count);
            return 0;
        }

        static volatile bool stopCollector;

        // Forces compacting collections in a loop: each one suspends the sleeping thread and walks
        // its stack, as a busy service's GC does. A uretprobe on a method in progress (return
        // address replaced on the stack) makes such a walk crash the process.
        static Thread StartCollector()
        {
            var t = new Thread(() =>
            {
                var junk = new System.Collections.Generic.List<byte[]>();
                while (!stopCollector)
                {
                    for (int k = 0; k < 200; k++) junk.Add(new byte[1000]);
                    if (junk.Count > 20000) junk.Clear();
                    GC.Collect(2, GCCollectionMode.Forced, true, true);
                }
            });
            t.IsBackground = true;
            t.Start();
            return t;
        }

        // String.Replace(string,string) has 239 (3.1) / 353 (8) bytes of IL: the JIT never inlines
        // a callee over 100 bytes, so every call runs the precompiled code.
        static int StringsMode(Options o)
        {
            var values = o.Values.Count > 0 ? o.Values.ToArray() : new[]
            {
                "hello netprobe",
                "héllo wörld ✓ 日本語 Ünïcödé",
                new string('x', 90) + "0123456789",
            };
            Func<string, string, string> viaDelegate = (s, n) => s.Replace("needle", n);
            MethodInfo replace = typeof(string).GetMethod("Replace", new[] { typeof(string), typeof(string) });
            int calls = 0;
            for (int i = 0; i < o.Count; i++)
            {
                foreach (var v in values)
                {
                    string r;
                    switch (o.Call)
                    {
                        case "direct": r = v.Replace("needle", v); break;
                        case "delegate": r = viaDelegate(v, v); break;
                        default: r = (string)replace.Invoke(v, new object[] { "needle", v }); break;
                    }
                    calls++;
                    Console.WriteLine("call " + calls + " String.Replace this=" + Quote(v) + " oldValue=\"needle\" newValue=" +
                                      Quote(v) + " len=" + v.Length + " result_len=" + r.Length);
                }
            }
            Console.WriteLine("done calls=" + calls);
            return 0;
        }

        // Nearly all of the time goes to String.Replace (precompiled CoreLib code; replaced by
        // tier-1 JIT code unless tiering is off), called from SpinLoop (JIT-compiled app code).
        // String.IsNullOrEmpty(string) starts `test rdi, rdi; je ...` in CoreLib 8.0.4's ReadyToRun
        // code: an entry probe moves from the test (single-stepped) to the je (emulated).
        static int EmptyMode(Options o)
        {
            var values = o.Values.Count > 0 ? o.Values.ToArray() : new[] { "np-empty-1", "", "np-empty-ü✓" };
            MethodInfo isNullOrEmpty = typeof(string).GetMethod("IsNullOrEmpty", new[] { typeof(string) });
            int calls = 0;
            for (int i = 0; i < o.Count; i++)
            {
                foreach (var v in values)
                {
                    bool r = (bool)isNullOrEmpty.Invoke(null, new object[] { v });
                    calls++;
                    Console.WriteLine("call " + calls + " String.IsNullOrEmpty value=" + Quote(v) + " result=" + r);
                }
            }
            Console.WriteLine("done calls=" + calls);
            return 0;
        }

        static int SpinMode(Options o)
        {
            var sb = new StringBuilder();
            for (int i = 0; i < 100; i++) sb.Append(new string('x', 34)).Append("needle");
            string text = sb.ToString();
            var sw = System.Diagnostics.Stopwatch.StartNew();
            long calls = 0, reportedCalls = 0, reportedMs = 0;
            var self = System.Diagnostics.Process.GetCurrentProcess();
            double reportedCpu = self.TotalProcessorTime.TotalMilliseconds;
            while (sw.ElapsedMilliseconds < o.Ms)
            {
                calls += SpinLoop(text, o.ReportMs > 0 ? 10 : 1000);
                long now = sw.ElapsedMilliseconds;
                if (o.ReportMs > 0 && now - reportedMs >= o.ReportMs)
                {
                    self.Refresh();
                    double cpu = self.TotalProcessorTime.TotalMilliseconds;
                    Console.WriteLine("rate t_ms=" + now + " calls=" + (calls - reportedCalls) + " ms=" + (now - reportedMs) +
                                      " cpu_ms=" + (long)(cpu - reportedCpu));
                    Console.Out.Flush();
                    reportedCpu = cpu;
                    reportedCalls = calls;
                    reportedMs = now;
                }
            }
            Console.WriteLine("done calls=" + calls);
            return 0;
        }

        // Many methods JIT-compiled: each round emits --methods DynamicMethods (a small
        // arithmetic body, unique per method) and calls each once, which JIT-compiles it; the
        // round's time is mostly the JIT's (and, with a perf map on, its writes).
        static int JitMode(Options o)
        {
            int methods = o.Methods;
            long compiled = 0, sink = 0;
            var self = System.Diagnostics.Process.GetCurrentProcess();
            for (int r = 1; r <= o.Count; r++)
            {
                self.Refresh();
                double cpu0 = self.TotalProcessorTime.TotalMilliseconds;
                var sw = System.Diagnostics.Stopwatch.StartNew();
                for (int i = 0; i < methods; i++)
                {
                    var m = new System.Reflection.Emit.DynamicMethod("np_jit_" + r + "_" + i, typeof(int),
                        new[] { typeof(int) }, typeof(Program).Module);
                    var il = m.GetILGenerator();
                    il.Emit(System.Reflection.Emit.OpCodes.Ldarg_0);
                    for (int k = 0; k < 8; k++)
                    {
                        il.Emit(System.Reflection.Emit.OpCodes.Ldc_I4, i * 8 + k + 1);
                        il.Emit(k % 2 == 0 ? System.Reflection.Emit.OpCodes.Add : System.Reflection.Emit.OpCodes.Xor);
                    }
                    il.Emit(System.Reflection.Emit.OpCodes.Ret);
                    var f = (Func<int, int>)m.CreateDelegate(typeof(Func<int, int>));
                    sink += f(r);
                    compiled++;
                }
                self.Refresh();
                var inv = System.Globalization.CultureInfo.InvariantCulture;
                Console.WriteLine("jit round=" + r + " methods=" + methods + " ms=" +
                                  sw.Elapsed.TotalMilliseconds.ToString("F1", inv) + " cpu_ms=" +
                                  (self.TotalProcessorTime.TotalMilliseconds - cpu0).ToString("F1", inv));
                Console.Out.Flush();
            }
            Console.WriteLine("done calls=" + compiled + " sink=" + sink);
            return 0;
        }

        static readonly object pulsed = new object();
        static volatile bool stopWaiters;

        // Two threads off the CPU for known reasons: one sleeping (Thread.Sleep: a nanosleep in
        // the runtime), one waiting for a monitor pulse (Monitor.Wait: a futex wait).
        static int WaitsMode(Options o)
        {
            var sleeper = new Thread(SleepWaiter) { Name = "np-sleeper" };
            var waiter = new Thread(MonitorWaiter) { Name = "np-waiter" };
            sleeper.Start();
            waiter.Start();
            var sw = System.Diagnostics.Stopwatch.StartNew();
            long pulses = 0;
            while (sw.ElapsedMilliseconds < o.Ms)
            {
                Thread.Sleep(50);
                lock (pulsed) { Monitor.Pulse(pulsed); }
                pulses++;
            }
            stopWaiters = true;
            lock (pulsed) { Monitor.PulseAll(pulsed); }
            sleeper.Join();
            waiter.Join();
            Console.WriteLine("done pulses=" + pulses);
            return 0;
        }

        [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
        static void SleepWaiter()
        {
            while (!stopWaiters) Thread.Sleep(20);
        }

        [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
        static void MonitorWaiter()
        {
            lock (pulsed)
            {
                while (!stopWaiters) Monitor.Wait(pulsed);
            }
        }

        [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
        static long SpinLoop(string text, int rounds)
        {
            long total = 0;
            for (int i = 0; i < rounds; i++)
                total += text.Replace("needle", "pin").Length > 0 ? 1 : 0;
            return total;
        }

        // The seven-int DateTime constructor, called through reflection by default (the IL of a
        // direct call can be inlined into this JIT-compiled caller).
        static int DatesMode(Options o)
        {
            var types = new Type[7];
            for (int k = 0; k < 7; k++) types[k] = typeof(int);
            ConstructorInfo ctor = typeof(DateTime).GetConstructor(types);
            int calls = 0;
            for (int i = 1; i <= o.Count; i++)
            {
                int[] a = { 2000 + i, 1 + i % 12, 1 + i % 28, i % 24, i % 60, (7 * i) % 60, (13 * i) % 1000 };
                DateTime d = o.Call == "direct"
                    ? new DateTime(a[0], a[1], a[2], a[3], a[4], a[5], a[6])
                    : (DateTime)ctor.Invoke(new object[] { a[0], a[1], a[2], a[3], a[4], a[5], a[6] });
                calls++;
                Console.WriteLine("call " + calls + " DateTime(" + string.Join(",", a) + ") ticks=" + d.Ticks);
            }
            Console.WriteLine("done calls=" + calls);
            return 0;
        }

        // Escapes without String.Replace, so that only the calls the mode announces hit a probe
        // on Replace.
        static string Quote(string s)
        {
            var sb = new StringBuilder("\"");
            foreach (char c in s)
            {
                if (c == '\\' || c == '"') sb.Append('\\');
                sb.Append(c);
            }
            return sb.Append('"').ToString();
        }
    }

    class Options
    {
        public string Mode = "";
        public int Port = 8080, MaxRequests = -1, Count = 10, Ms = 100, DelayMs = 0, ReportMs = 0, Methods = 1000;
        public string Call = "delegate";
        public bool Wait, Gc;
        public System.Collections.Generic.List<string> Values = new System.Collections.Generic.List<string>();

        public Options(string[] args)
        {
            Mode = args[0];
            for (int i = 1; i < args.Length; i++)
            {
                string a = args[i];
                Func<string> next = () =>
                {
                    if (i + 1 >= args.Length) throw new ArgumentException(a + " needs a value");
                    return args[++i];
                };
                switch (a)
                {
                    case "--port": Port = int.Parse(next()); break;
                    case "--max-requests": MaxRequests = int.Parse(next()); break;
                    case "--count": Count = int.Parse(next()); break;
                    case "--ms": Ms = int.Parse(next()); break;
                    case "--delay-ms": DelayMs = int.Parse(next()); break;
                    case "--report-ms": ReportMs = int.Parse(next()); break;
                    case "--methods": Methods = int.Parse(next()); break;
                    case "--call":
                        Call = next();
                        if (Call != "direct" && Call != "delegate" && Call != "reflection")
                            throw new ArgumentException("--call must be direct, delegate or reflection");
                        break;
                    case "--value": Values.Add(next()); break;
                    case "--wait": Wait = true; break;
                    case "--gc": Gc = true; break;
                    default: Values.Add(a); break;
                }
            }
        }
    }

    /// A minimal HTTP/1.1 server over TcpListener (no ASP.NET here): one request per connection.
    class Server
    {
        readonly IEchoProvider echo;
        readonly IFibonacciProvider fib;

        public Server(IEchoProvider echo, IFibonacciProvider fib)
        {
            this.echo = echo;
            this.fib = fib;
        }

        public int Run(int port, int maxRequests)
        {
            var listener = new TcpListener(IPAddress.Loopback, port);
            listener.Start();
            Console.WriteLine("listening on http://127.0.0.1:" + ((IPEndPoint)listener.LocalEndpoint).Port + "/");
            Console.Out.Flush();
            for (int served = 0; maxRequests < 0 || served < maxRequests; served++)
            {
                using (var client = listener.AcceptTcpClient())
                using (var stream = client.GetStream())
                {
                    Handle(stream);
                }
            }
            listener.Stop();
            return 0;
        }

        void Handle(Stream stream)
        {
            var reader = new StreamReader(stream, Encoding.ASCII);
            string requestLine = reader.ReadLine() ?? "";
            while (!string.IsNullOrEmpty(reader.ReadLine())) { }
            string[] parts = requestLine.Split(' ');
            int status = 200;
            string body;
            if (parts.Length < 2 || parts[0] != "GET")
            {
                status = 405;
                body = "only GET is supported\n";
            }
            else
            {
                string path = parts[1];
                if (path.StartsWith("/echo/"))
                    body = echo.calculateEchoValue(Uri.UnescapeDataString(path.Substring(6))) + "\n";
                else if (path.StartsWith("/fibonacci/"))
                {
                    int n;
                    if (int.TryParse(path.Substring(11), out n) && n >= 0)
                        body = fib.calculateFibonacciValue(n) + "\n";
                    else
                    {
                        status = 400;
                        body = "fibonacci needs a non-negative integer\n";
                    }
                }
                else if (path == "/health")
                    body = "ok\n";
                else
                {
                    status = 404;
                    body = "endpoints: /echo/{value} /fibonacci/{n} /health\n";
                }
            }
            byte[] payload = Encoding.UTF8.GetBytes(body);
            string head = "HTTP/1.1 " + status + (status == 200 ? " OK" : " Error") +
                          "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + payload.Length +
                          "\r\nConnection: close\r\n\r\n";
            byte[] h = Encoding.ASCII.GetBytes(head);
            stream.Write(h, 0, h.Length);
            stream.Write(payload, 0, payload.Length);
            stream.Flush();
            Console.WriteLine(parts.Length > 1 ? parts[0] + " " + parts[1] + " -> " + status : "bad request -> " + status);
        }
    }
}
