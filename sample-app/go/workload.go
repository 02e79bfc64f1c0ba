package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
)

// workload makes a deterministic set of calls, so a test can assert on exact hit counts and
// argument/return values. With -wait it prints "ready pid=PID" and waits for a line on stdin
// before calling anything, so probes can be placed first. Summary lines go to stdout. With -hold
// it stays after the summary until stdin ends.
//
// Per round i in 0..n-1 (n = -n, default 5):
//   - Add3(i, 10*i, 100*i)                         ints in registers (ax, bx, cx)
//   - Greet("netprobe", i)                          a string (ptr, len) and an int
//   - (*Calc).Add(calc, i)                          a method: receiver first
//   - Classify(v) for v in {-7, 0, 7, 1000}         four return paths, four values
//   - BigFrame(i) in a fresh goroutine              its stack grows at its own prologue
//   - Recurse(64)                                   deep recursion, the stack grows mid-call
func workload(args []string) int {
	fs := flag.NewFlagSet("workload", flag.ContinueOnError)
	n := fs.Int("n", 5, "rounds")
	wait := fs.Bool("wait", false, "print ready and wait for a line on stdin before the calls")
	hold := fs.Bool("hold", false, "after the summary, print held and stay until stdin ends")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *wait {
		fmt.Printf("ready pid=%d\n", os.Getpid())
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	}
	calc := &Calc{base: 1000}
	var sumAdd3, sumGreet, sumAdd, sumClassify, sumBig, sumRec int
	for i := 0; i < *n; i++ {
		sumAdd3 += Add3(i, 10*i, 100*i)
		sumGreet += Greet("netprobe", i)
		sumAdd += calc.Add(i)
		for _, v := range []int{-7, 0, 7, 1000} {
			sumClassify += Classify(v)
		}
		done := make(chan int)
		go func(i int) { done <- BigFrame(i) }(i)
		sumBig += <-done
		rec := make(chan int)
		go func() { rec <- Recurse(64) }()
		sumRec += <-rec
	}
	fmt.Printf("Add3 calls=%d sum=%d\n", *n, sumAdd3)
	fmt.Printf("Greet calls=%d sum=%d\n", *n, sumGreet)
	fmt.Printf("Calc.Add calls=%d sum=%d\n", *n, sumAdd)
	fmt.Printf("Classify calls=%d sum=%d\n", 4**n, sumClassify)
	fmt.Printf("BigFrame calls=%d sum=%d\n", *n, sumBig)
	fmt.Printf("Recurse calls=%d outer=%d sum=%d\n", 65**n, *n, sumRec)
	if *hold {
		// A tracer names the frames of its hits from this process's maps: it must still run.
		fmt.Println("held")
		_, _ = io.Copy(io.Discard, os.Stdin)
	}
	return 0
}

// Add3 returns a+b+c.
//
//go:noinline
func Add3(a, b, c int) int {
	return a + b + c
}

// Greet returns len(name)*times + times.
//
//go:noinline
func Greet(name string, times int) int {
	return len(name)*times + times
}

// Calc is a receiver for a pointer method.
type Calc struct {
	base int
}

// Add returns c.base + x.
//
//go:noinline
func (c *Calc) Add(x int) int {
	return c.base + x
}

// Classify returns -1 for negatives, 0 for zero, 1 for 1..99 and 2 otherwise: four return paths,
// each compiled to its own RET.
//
//go:noinline
func Classify(v int) int {
	if v < 0 {
		return -1
	}
	if v == 0 {
		return 0
	}
	if v < 100 {
		return 1
	}
	return 2
}

// BigFrame has a 64 KiB frame. A new goroutine starts with a small stack, so calling BigFrame
// as a goroutine's first function makes its stack-check prologue call morestack, which then
// re-enters BigFrame from its first byte. Returns seed + 1.
//
//go:noinline
func BigFrame(seed int) int {
	var buf [65536]byte
	for i := range buf {
		buf[i] = byte(seed + i)
	}
	return int(buf[0]) - int(byte(seed)) + seed + 1
}

// Recurse calls itself depth times with a frame big enough to grow the stack several times on
// the way down; returns depth + 1 (the number of calls made, itself included).
//
//go:noinline
func Recurse(depth int) int {
	var pad [512]byte
	pad[depth%len(pad)] = byte(depth)
	if depth == 0 {
		return 1 + int(pad[0])
	}
	return 1 + Recurse(depth-1) + int(pad[depth%len(pad)]) - int(byte(depth))
}
