module example.com/kproxy-example

go 1.21
