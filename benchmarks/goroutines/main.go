// A Go program that parks all the time: two goroutines hand a value back and forth over
// unbuffered channels, printing the round trips made each second. For measuring what
// `netprobe profile --off-cpu --goroutines` (runtime.gopark probed) costs a program that parks
// millions of times a second (BENCHMARKS.md, "Off-CPU profiles").
package main

import (
	"fmt"
	"time"
)

func main() {
	a, b := make(chan int), make(chan int)
	go func() {
		for v := range a {
			b <- v
		}
	}()
	for {
		start := time.Now()
		n := 0
		for time.Since(start) < time.Second {
			for i := 0; i < 100; i++ {
				a <- i
				<-b
			}
			n += 100
		}
		fmt.Println(n)
	}
}
