// etcd's server binary: the root module go.etcd.io/etcd/v3 (whose main.go is just this call)
// has replace directives too, so it is built from the server module through this wrapper.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
