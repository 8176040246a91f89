"""Whether a Pod may have a job at all, and what it asks Slurm for: the pod policies of the
revision last applied, admission (admission.py), and its pod rules. A Pod that may not is
refused through Effects, with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from reconciler import wellknown as wk
from reconciler.adapters.kube import Kube
from reconciler.kuberules.problem import Problem
from reconciler.objects import Obj
from reconciler.scheduler.clients import SlurmClients
from reconciler.scheduler.decide.accounting_decide import unaccounted
from reconciler.scheduler.decide.admission import PodRequest, Rejection, admit
from reconciler.scheduler.effects import Effects
from reconciler.scheduler.placement import Placement
from reconciler.scheduler.pod_cache import refusal as cache_refusal
from reconciler.scheduler.pod_cache import slimmed
from reconciler.scheduler.pod_policies import PodPolicies
from reconciler.scheduler.settings import SchedulerSettings

log = logging.getLogger(__name__)

NAMESPACE_TTL_SECONDS = 30.0  # a label change reaches namespaceObject within this


class Intake:
    def __init__(
        self,
        kube: Kube,
        slurm: SlurmClients,
        settings: SchedulerSettings,
        effects: Effects,
        placement: Placement,
        clock: Callable[[], float],
    ) -> None:
        self._kube = kube
        self._slurm = slurm
        self.settings = settings
        self._effects = effects
        self._placement = placement
        self._clock = clock
        self.policies = PodPolicies()  # replaced whole by set_policies: no lock needed
        self._namespaces: dict[str, tuple[float, Obj | None]] = {}  # name -> (read at, object)

    def request_of(self, pod: Obj, problems: Sequence[Problem] = ()) -> PodRequest | None:
        """The Pod's request to Slurm, or None after refusing it: policies, admission, its pod
        rules, and `problems` the caller found (a gang's rules between members)."""
        too_large = cache_refusal(pod)
        if too_large is not None:
            self._effects.refuse(pod, too_large)
            return None
        if not self._passes_policies(pod):
            return None
        admission = self.admission(pod)
        if isinstance(admission, Rejection):
            self._effects.refuse(pod, admission.message())
            return None
        refusal = "; ".join(str(p) for p in problems) or self._placement.topology_refusal(pod)
        if refusal:
            self._effects.refuse(pod, refusal)
            return None
        self._effects.stages.mark([pod["metadata"]["uid"]], "admitted", self._clock())
        said = unaccounted(admission.account, admission.qos, self.settings.accounting)
        if said is not None:
            self._effects.warn_once(pod, wk.EVENT_ACCOUNTING_OFF, said)
        return admission

    def admission(self, pod: Obj) -> PodRequest | Rejection:
        return admit(
            pod,
            kill_wait_seconds=self.settings.kill_wait_seconds,
            slurm_version=self._slurm.release,
            default_user_id=self.settings.default_user_id,
        )

    def _passes_policies(self, pod: Obj) -> bool:
        policies = self.policies
        if not policies.policies:
            return True
        namespace = self._namespace(pod) if policies.reads_namespace else None
        whole = self._whole(pod) if slimmed(pod) else pod
        if whole is None:
            return False  # gone, or replaced by a Pod of the same name: its own event comes
        verdict = policies.judge(whole, namespace)
        for finding in verdict.audits:
            log.info("scheduler: policy audit: %s", finding)
        refusal = verdict.refusal()
        if refusal is not None:
            self._effects.refuse(pod, refusal)
            return False
        for finding in verdict.warnings:
            message = f"policy {finding.policy}: {finding.message}"
            self._effects.pods_out.event(
                pod, wk.EVENT_POLICY_WARNING, "Scheduling", message, "Warning"
            )
        return True

    def _whole(self, pod: Obj) -> Obj | None:
        """The whole Pod, for policies that may read any field: the cache kept only part of
        a large one (pod_cache.py). Read once per admission, and dropped after."""
        meta = pod["metadata"]
        whole = self._kube.get("v1", "Pod", meta["name"], meta["namespace"])
        if whole is None or whole["metadata"].get("uid") != meta["uid"]:
            return None
        return whole

    def _namespace(self, pod: Obj) -> Obj | None:
        """The Pod's Namespace for `namespaceObject`, read at most every NAMESPACE_TTL s."""
        name = pod["metadata"]["namespace"]
        read_at, found = self._namespaces.get(name, (0.0, None))
        if self._clock() - read_at > NAMESPACE_TTL_SECONDS:
            found = self._kube.get("v1", "Namespace", name)
            self._namespaces[name] = (self._clock(), found)
        return found
