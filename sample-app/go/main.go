// Command sampleapp is netprobe's Go sample service.
//
//	sampleapp serve [-addr 127.0.0.1:8080]   HTTP service: GET /echo?msg=..., GET /fib?n=..., GET /spin?n=...
//	sampleapp workload [-n 5] [-wait]        deterministic calls for probe tests, then exit
//
// The workload makes a known number of calls with known arguments to functions that cover what
// Go tracing must get right (see workload.go). Every probed function is //go:noinline so each call
// in the source is a call in the binary.
package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sampleapp serve [-addr HOST:PORT] | workload [-n N] [-wait]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		os.Exit(serve(os.Args[2:]))
	case "workload":
		os.Exit(workload(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}

func serve(args []string) int {
	addr := "127.0.0.1:8080"
	if len(args) == 2 && args[0] == "-addr" {
		addr = args[1]
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", EchoHandler)
	mux.HandleFunc("/fib", FibHandler)
	mux.HandleFunc("/spin", SpinHandler)
	fmt.Printf("listening on %s pid=%d\n", addr, os.Getpid())
	if err := http.ListenAndServe(addr, mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// EchoHandler answers GET /echo?msg=TEXT with TEXT.
func EchoHandler(w http.ResponseWriter, r *http.Request) {
	fmt.Fprint(w, Echo(r.URL.Query().Get("msg")))
}

// FibHandler answers GET /fib?n=N with the N-th Fibonacci number.
func FibHandler(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil || n < 0 || n > 90 {
		http.Error(w, "n must be an integer in 0..90", http.StatusBadRequest)
		return
	}
	fmt.Fprint(w, Fib(n))
}

// SpinHandler answers GET /spin?n=N with Spin(N): a CPU-bound request for profiling tests
// (N = 10,000,000 takes about 10 ms).
func SpinHandler(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil || n < 0 || n > 1_000_000_000 {
		http.Error(w, "n must be an integer in 0..1000000000", http.StatusBadRequest)
		return
	}
	fmt.Fprint(w, Spin(n))
}

// Spin mixes n numbers into a checksum: n rounds of multiply-add, all its time on the CPU.
//
//go:noinline
func Spin(n int) int {
	x := 0
	for i := 0; i < n; i++ {
		x = x*31 + i
	}
	return x
}

// Echo returns its argument unchanged.
//
//go:noinline
func Echo(msg string) string {
	return msg
}

// Fib returns the n-th Fibonacci number (iteratively; fib(0)=0, fib(1)=1).
//
//go:noinline
func Fib(n int) int {
	a, b := 0, 1
	for i := 0; i < n; i++ {
		a, b = b, a+b
	}
	return a
}
