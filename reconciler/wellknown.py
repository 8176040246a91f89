"""Every string that marks ownership or carries meaning between us and the cluster.

A grep for any label, annotation, prefix or field-manager name should land here first.
"""

from typing import Final

# Annotation namespace SUNK users already write on their Pods (SUNK's "Schedule Kubernetes Pods with
# Slurm" and "SUNK Pod Scheduler" pages).
SUNK_DOMAIN: Final = "sunk.coreweave.com"
# Our own namespace for labels/annotations we put on objects we manage.
DOMAIN: Final = "reconciler.sunk.dev"
# Policy documents in policies/ and a config repo's policies/ (reconciler/config/policy_file.py).
POLICY_API_VERSION: Final = f"policy.{DOMAIN}/v1alpha1"

# Labels on every object we render; the ownership label is how live state is selected.
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "sunk-reconciler"
LABEL_NAME: Final = "app.kubernetes.io/name"
LABEL_INSTANCE: Final = "app.kubernetes.io/instance"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_PART_OF: Final = "app.kubernetes.io/part-of"
# Set by the StatefulSet controller: the template revision a Pod was made from.
LABEL_CONTROLLER_REVISION: Final = "controller-revision-hash"
LABEL_RELEASE: Final = f"{DOMAIN}/release"
LABEL_NODESET: Final = f"{DOMAIN}/nodeset"
# What a node definition's `labels` may not set on its Pods: the labels live state is selected
# by, the StatefulSet's selector, the node set's; any other key under DOMAIN is ours too.
OWNED_POD_LABELS: Final = (
    LABEL_MANAGED_BY, LABEL_PART_OF, LABEL_COMPONENT, LABEL_RELEASE, LABEL_NAME, LABEL_INSTANCE,
    LABEL_NODESET,
)  # fmt: skip

# Annotations on rendered objects.
ANNOTATION_CONFIG_HASH: Final = f"{DOMAIN}/config-hash"
ANNOTATION_SOURCE_REVISION: Final = f"{DOMAIN}/source-revision"
ANNOTATION_DEFAULT_CONTAINER: Final = "kubectl.kubernetes.io/default-container"
# On a Secret we generate (munge key, JWT key): what its data is; the data itself is never shown.
ANNOTATION_GENERATED: Final = f"{DOMAIN}/generated"
# On a Secret whose data comes from values: "<key>: <values key>" (never the data).
ANNOTATION_FROM_VALUES: Final = f"{DOMAIN}/from-values"
# What `kubectl rollout restart` sets on a Deployment's Pod template; apply sets it the same way
# to restart slurmctld when NodeName lines change.
ANNOTATION_RESTARTED_AT: Final = "kubectl.kubernetes.io/restartedAt"
# On the controller Pods: when apply last changed slurm.conf. Changing the Pod makes kubelet
# resync its volumes now rather than within its periodic sync; the Pod's reconfigure sidecar
# then tells slurmctld to reread them.
ANNOTATION_CONFIG_APPLIED: Final = f"{DOMAIN}/config-applied-at"
# On the slurm.conf ConfigMap: the Slurm nodes its slurm.conf declares (running and FUTURE),
# as a hostlist. Plan and apply read which nodes are ours here, never from the text, where an
# extraConfig line could pass for ours.
ANNOTATION_SLURM_NODES: Final = f"{DOMAIN}/slurm-nodes"

# Slurm: every drain we make carries this reason prefix; we only ever resume those.
DRAIN_REASON_PREFIX: Final = "reconciler:"

# Slurm reservations from `slurmConfig.reservations` are named "<release>-<name in git>", and
# that prefix is how we know ours: Slurm 22.05 reservations have no comment or other free field
# (`scontrol create reservation ... Comment=x` says "Unknown parameter Comment=x"). A reservation
# without the prefix is never updated or deleted, only reported.
RESERVATION_NAME_FORMAT: Final = "{release}-{name}"


def reservation_prefix(release: str) -> str:
    """What the Slurm name of every reservation of `release` starts with (our marker)."""
    return RESERVATION_NAME_FORMAT.format(release=release, name="")


# Slurm accounts and QOS from `slurmConfig.accounting` carry this at the end of their
# description (sacctmgr keeps descriptions in lowercase, so it is lowercase too): only those are
# updated or deleted. Users have no description: a user is ours when every association it has
# is with an account of ours.
ACCOUNTING_MARKER_FORMAT: Final = "(reconciler {release})"


def accounting_marker(release: str) -> str:
    return ACCOUNTING_MARKER_FORMAT.format(release=release)


# Server-side apply field managers.
FIELD_MANAGER: Final = "sunk-reconciler"
SCHEDULER_FIELD_MANAGER: Final = "sunk-reconciler-scheduler"
# Pod status gets its own manager: 1.20 does not record the subresource in managed fields.
SCHEDULER_STATUS_MANAGER: Final = "sunk-reconciler-scheduler-status"

# Kubernetes Node labels SUNK users select GPUs by (SUNK's "Schedule Kubernetes Pods with Slurm",
# its older text in "Run Workloads", and "SUNK Pod Scheduler").
NODE_LABEL_GPU_CLASS: Final = "gpu.nvidia.com/class"
NODE_LABEL_GPU_MODEL: Final = "gpu.nvidia.com/model"
NODE_LABEL_REGION: Final = "topology.kubernetes.io/region"

# Extended resources.
RESOURCE_NVIDIA_GPU: Final = "nvidia.com/gpu"
RESOURCE_SUNK_ACCELERATOR: Final = f"{SUNK_DOMAIN}/accelerator"

# The embedded local stack: the label on Nodes its node agent registers (and owns).
LABEL_LOCAL_NODE: Final = f"{DOMAIN}/local-node"

# ---- The Pod scheduler --------------------------------------------------------------------

# Pod annotations SUNK users write (SUNK's "Schedule Kubernetes Pods with Slurm" and "SUNK Pod
# Scheduler" pages); the value types are checked at admission.
SUNK_ANNOTATION_PREFIX: Final = f"{SUNK_DOMAIN}/"
ANNOTATION_ACCOUNT: Final = f"{SUNK_DOMAIN}/account"
ANNOTATION_COMMENT: Final = f"{SUNK_DOMAIN}/comment"
ANNOTATION_CONSTRAINTS: Final = f"{SUNK_DOMAIN}/constraints"
ANNOTATION_EXCLUSIVE: Final = f"{SUNK_DOMAIN}/exclusive"
ANNOTATION_EXCLUDED_NODES: Final = f"{SUNK_DOMAIN}/excluded-nodes"
ANNOTATION_REQUIRED_NODES: Final = f"{SUNK_DOMAIN}/required-nodes"
ANNOTATION_PARTITION: Final = f"{SUNK_DOMAIN}/partition"
ANNOTATION_PREFER: Final = f"{SUNK_DOMAIN}/prefer"
ANNOTATION_PRIORITY: Final = f"{SUNK_DOMAIN}/priority"
ANNOTATION_QOS: Final = f"{SUNK_DOMAIN}/qos"
ANNOTATION_RESERVATION: Final = f"{SUNK_DOMAIN}/reservation"
ANNOTATION_USER_ID: Final = f"{SUNK_DOMAIN}/user-id"
ANNOTATION_GROUP_ID: Final = f"{SUNK_DOMAIN}/group-id"
ANNOTATION_CWD: Final = f"{SUNK_DOMAIN}/current-working-dir"
ANNOTATION_TIMEOUT: Final = f"{SUNK_DOMAIN}/timeout"

# What the scheduler records on a Pod it handles (read back after a restart).
ANNOTATION_JOB_ID: Final = f"{DOMAIN}/slurm-job-id"
ANNOTATION_SLURM_NODE: Final = f"{DOMAIN}/slurm-node"
ANNOTATION_REJECTED: Final = f"{DOMAIN}/rejected"  # fingerprint of the Pod admission refused
LABEL_SCHEDULED_BY: Final = f"{DOMAIN}/scheduled-by"

# Placeholder jobs: the name carries the Pod's UID, so a restarted scheduler finds its jobs.
PLACEHOLDER_JOB_PREFIX: Final = "pod:"
# A gang's one job: `pod-group:<namespace>/<group>@gang_<namespace>_<group>`; the part after
# "@" is the gang's key (DNS names have no "_", so it cannot collide with a Pod UID).
GANG_JOB_PREFIX: Final = "pod-group:"
GANG_KEY_PREFIX: Final = "gang_"
# After the key, a placeholder's name carries the name of the scheduler that made it
# (`pod:<namespace>/<pod>@<uid>:<scheduler>`): schedulers sharing a Slurm tell their jobs apart.
# Names, UIDs and keys never hold ":" (DNS names, UUIDs), so the first ":" after "@" splits.
JOB_NAME_SCHEDULER_SEPARATOR: Final = ":"

# Gangs (all of a group's Pods bound together, or none): the scheduler-plugins coscheduling
# label and its PodGroup CRD, or our plain annotations for groups without the CRD.
LABEL_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"
POD_GROUP_API_VERSION: Final = "scheduling.x-k8s.io/v1alpha1"
POD_GROUP_KIND: Final = "PodGroup"
ANNOTATION_POD_GROUP: Final = f"{DOMAIN}/pod-group"
ANNOTATION_POD_GROUP_MIN_MEMBER: Final = f"{DOMAIN}/pod-group-min-member"
ANNOTATION_GANG_POLICY: Final = f"{DOMAIN}/gang-failure-policy"
# Its values, and scheduler.gangFailurePolicy's: what happens when a running gang loses a member.
GANG_FAILURE_POLICIES: Final = ("restart", "keep-going")
# Environment of a placeholder job: how it reaches the hooks API, and its per-Pod credential.
ENV_HOOKS_URL: Final = "SUNK_HOOKS_URL"
ENV_POD_UID: Final = "SUNK_POD_UID"
ENV_POD: Final = "SUNK_POD"
ENV_HOOK_TOKEN: Final = "SUNK_HOOK_TOKEN"  # a secret: never logged
# Set by the kubelet in every container: we run in a Pod, with a service account.
ENV_IN_CLUSTER: Final = "KUBERNETES_SERVICE_HOST"
HOOKS_PATH_PREFIX: Final = "/hooks/v1/pods/"

# The Secret holding the key hook credentials are derived from (shared by all replicas).
HOOKS_SECRET_SUFFIX: Final = "-scheduler-hooks"
HOOKS_SECRET_KEY: Final = "hmac-key"

# Power saving: the Secret slurmctld's SuspendProgram/ResumeProgram read (the hooks URL and
# their Authorization header; written by the scheduler), and the path they call.
POWER_SECRET_SUFFIX: Final = "-power-auth"
POWER_SECRET_URL_KEY: Final = "url"
POWER_SECRET_HEADER_KEY: Final = "header"  # a secret: never logged
POWER_PROGRAMS_SUFFIX: Final = "-power-programs"
HOOKS_POWER_PREFIX: Final = "/hooks/v1/power/"
# What a power call's token is derived from (hook tokens derive from Pod UIDs, never this).
POWER_TOKEN_SUBJECT: Final = "slurmctld:power"
POWER_FIELD_MANAGER: Final = "sunk-reconciler-power"
# On a held slurmd Pod (power saving): the Node its Slurm node left when it powered down.
# It goes back there when it fits, and keeps its place in topology.conf meanwhile.
ANNOTATION_LAST_NODE: Final = f"{DOMAIN}/last-node"
# Events on a slurmd Pod when Slurm powers its node down (the Pod is deleted) or up (bound).
EVENT_POWERED_DOWN: Final = "SlurmNodePoweredDown"
EVENT_POWERED_UP: Final = "SlurmNodePoweredUp"

# Event reasons on Pods.
EVENT_REJECTED: Final = "FailedScheduling"
EVENT_SUBMITTED: Final = "SlurmJobSubmitted"
EVENT_SCHEDULED: Final = "Scheduled"
EVENT_SLURM_ENDED: Final = "SlurmJobEnded"
EVENT_RELEASED: Final = "SlurmJobReleased"
EVENT_BIND_FAILED: Final = "FailedBinding"
EVENT_POLICY_WARNING: Final = "PolicyWarning"
EVENT_GANG_WAITING: Final = "GangWaiting"
EVENT_GANG_RESTART: Final = "GangRestart"
# On a waiting Pod whose schedulerName looks like ours but is none of the names we answer to.
EVENT_SCHEDULER_NAME_UNKNOWN: Final = "SchedulerNameNotServed"
# On a Pod that names a Slurm account or QOS where Slurm accounting is off (neither is charged
# or enforced): once per Pod.
EVENT_ACCOUNTING_OFF: Final = "SlurmAccountingOff"

# The local node agent: simulated container stop time of a Pod (tests of teardown ordering).
ANNOTATION_LOCAL_STOP_SECONDS: Final = f"{DOMAIN}/local-stop-seconds"

# ---- Node health, both ways (reconciler/sync) ---------------------------------------------

# slurmd Pods carry app.kubernetes.io/name=slurmd; the Pod's name is its Slurm node's name.
SLURMD_APP_NAME: Final = "slurmd"
# Drains the node sync makes for a Kubernetes cause carry this prefix; it resumes only those.
DRAIN_REASON_K8S_PREFIX: Final = "k8s:"
# On each slurmd Pod: its Slurm node's health as a Pod condition, its state and reason.
CONDITION_SLURM_NODE_HEALTHY: Final = f"{DOMAIN}/SlurmNodeHealthy"
ANNOTATION_SLURM_STATE: Final = f"{DOMAIN}/slurm-state"
ANNOTATION_SLURM_REASON: Final = f"{DOMAIN}/slurm-reason"
# A Node cordoned because every Slurm node on it is down carries this mark; only a Node so
# marked is ever uncordoned, so an admin's cordon is never undone.
ANNOTATION_CORDONED_BY: Final = f"{DOMAIN}/cordoned-by"
CORDONED_BY_VALUE: Final = "reconciler"
# The Pod condition gets its own manager: 1.20 does not record the subresource in managed
# fields (see SCHEDULER_STATUS_MANAGER).
NODE_SYNC_FIELD_MANAGER: Final = "sunk-reconciler-node-sync"
# Events on a Kubernetes Node when we drain or resume the Slurm node it hosts (node sync and
# apply), so `kubectl describe node` says why; their reporting controller.
EVENT_SLURM_NODE_DRAINED: Final = "SlurmNodeDrained"
EVENT_SLURM_NODE_RESUMED: Final = "SlurmNodeResumed"
EVENT_REPORTER: Final = "sunk-reconciler"
# Events on the daemon's status ConfigMap: a revision applied, refused by policy, or failed.
EVENT_REVISION_APPLIED: Final = "RevisionApplied"
EVENT_REVISION_DENIED: Final = "RevisionDenied"
EVENT_REVISION_FAILED: Final = "RevisionFailed"
# Events on the same ConfigMap as a Slurm upgrade goes (plan/upgrade_run.py): a step taken
# (backup, a stage applied, timeouts restored), and the stop of a failed check.
EVENT_UPGRADE_STEP: Final = "SlurmUpgradeStep"
EVENT_UPGRADE_STOPPED: Final = "SlurmUpgradeStopped"
NODE_SYNC_STATUS_MANAGER: Final = "sunk-reconciler-node-sync-status"

# CoreWeave-only names the shipped layers use (as SUNK's do): compute.clusterLabels renames them.
NODE_LABEL_CW_CPU: Final = "node.coreweave.cloud/cpu"
