"""The stack's Kubernetes control plane: etcd, kube-apiserver and kube-controller-manager on
loopback, and their certificates."""
