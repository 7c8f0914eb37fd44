"""Retry topology as desired state, reconciled against what brokers report.

Kubernetes-agnostic: the operator (a Kopf driver) and embedded mode share it. One reconcile::

    desired = Desired(groups=(group_from_resource(resource),))
    todo = plan(desired, await observe(admin, desired, cluster="orders"))  # pure diff
    result = await apply(todo, admin)                                      # AdminClient
    observed = await observe(admin, desired, cluster="orders")
    status = group_status(desired.groups[0], observed, plan(desired, observed))

Planning against what ``apply`` produced is empty (idempotent). Deleting a group or topic is a
:class:`Removal`, refused while its dead letters (its messages) would be lost, unless forced.
"""

from reconsume.topology.apply import Applied, Failure, apply
from reconsume.topology.model import (
    ConsumeType,
    CustomizedPolicy,
    DelayLevelsPolicy,
    DeletionPolicy,
    Desired,
    DesiredGroup,
    DesiredTopic,
    ExponentialPolicy,
    Kind,
    MessageModel,
    Permission,
    Removal,
    RetryPolicy,
    UnknownPolicy,
    policy_from_json,
    policy_to_json,
)
from reconsume.topology.observe import BrokerState, Observed, TopologyAdmin, observe
from reconsume.topology.plan import Action, ActionKind, Plan, Refusal, plan
from reconsume.topology.spec import (
    SpecError,
    group_from_resource,
    group_from_spec,
    topic_from_resource,
    topic_from_spec,
)
from reconsume.topology.status import (
    BrokerStatus,
    ObjectStatus,
    dead_letter_depth,
    group_status,
    retry_depth,
    topic_depth,
    topic_status,
)

__all__ = [
    # desired state
    "Desired",
    "DesiredGroup",
    "DesiredTopic",
    "Removal",
    "Kind",
    "DeletionPolicy",
    "MessageModel",
    "ConsumeType",
    "Permission",
    "RetryPolicy",
    "DelayLevelsPolicy",
    "CustomizedPolicy",
    "ExponentialPolicy",
    "UnknownPolicy",
    "policy_to_json",
    "policy_from_json",
    "SpecError",
    "group_from_spec",
    "group_from_resource",
    "topic_from_spec",
    "topic_from_resource",
    # observation, plan, apply
    "TopologyAdmin",
    "BrokerState",
    "Observed",
    "observe",
    "Action",
    "ActionKind",
    "Refusal",
    "Plan",
    "plan",
    "Applied",
    "Failure",
    "apply",
    # status
    "BrokerStatus",
    "ObjectStatus",
    "group_status",
    "topic_status",
    "retry_depth",
    "dead_letter_depth",
    "topic_depth",
]
