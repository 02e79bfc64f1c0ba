module netprobe.example/sampleapp

go 1.19
