module kproxy/conformance/drivers/common-go/contract

go 1.26.0
