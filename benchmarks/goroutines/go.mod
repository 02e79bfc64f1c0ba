module goroutines
go 1.21
