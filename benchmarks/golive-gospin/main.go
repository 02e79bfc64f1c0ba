// Command gospin calls Tick as fast as it can for SECS seconds on one goroutine, then prints the
// number of calls (benchmarks/golive.sh: the per-call cost of probe pairs on a Go function).
//
//	gospin SECS
//
// Tick is a small leaf function: the linker gives it no stack check, its goroutine's stack never
// grows while it runs, and nothing allocates, so no GC walks the stack: a uretprobe on it does not
// crash the program (it would on a function whose stack grows, see netprobe-cli/tests/golive_e2e.rs).
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

//go:noinline
func Tick(i int) int {
	return i + 1
}

func main() {
	secs, err := strconv.ParseFloat(os.Args[len(os.Args)-1], 64)
	if err != nil || len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gospin SECS")
		os.Exit(2)
	}
	limit := time.Duration(secs * float64(time.Second))
	start := time.Now()
	count, v := 0, 0
	for time.Since(start) < limit {
		for k := 0; k < 256; k++ {
			v = Tick(v)
		}
		count += 256
	}
	fmt.Println(count)
}
