"""The real-kubelet cluster (`local up --kubelet`): kubelets on containerd in a network namespace
of their own, kube-proxy, kube-scheduler, cluster DNS, our images built and loaded without a
registry, and the git server of `--in-cluster`."""
