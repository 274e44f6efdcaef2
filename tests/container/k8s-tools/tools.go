//go:build tools

// The commands the container stage builds from this module (go build k8s.io/kubernetes/cmd/...).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
