"""The node agent (`local up` without `--kubelet`): one process plays kubelet for the stack's
Nodes and the default scheduler for our Pods, and runs each Pod's real program on this host
(Slurm's daemons, sshd, s6 services) with its volumes, environment and cgroup."""
