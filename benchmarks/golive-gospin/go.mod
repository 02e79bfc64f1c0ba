module netprobe.example/gospin

go 1.19
