"""Validation (spec §a.5) with Kubernetes' rendered messages, rule by rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.model import defaults, validation
from tests import testdata

TESTDATA = testdata.DAEMONSETS

Obj = dict[str, Any]

RU = "spec.updateStrategy.rollingUpdate"
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
QUALIFIED_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
PERCENT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)


def daemonset() -> Obj:
    """A valid, defaulted DaemonSet."""
    ds: Obj = defaults.default_daemonset(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "fluentd", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": "x"}},
                "template": {
                    "metadata": {"labels": {"app": "x"}},
                    "spec": {"containers": [{"name": "c", "image": "fluentd:v1"}]},
                },
            },
        }
    )
    return ds


def pod_spec(ds: Obj) -> Obj:
    spec: Obj = ds["spec"]["template"]["spec"]
    return spec


def rolling(ds: Obj) -> Obj:
    ru: Obj = ds["spec"]["updateStrategy"]["rollingUpdate"]
    return ru


def test_valid_daemonset_has_no_errors() -> None:
    assert validation.validate(daemonset()) == []


# ---- the real manifests ------------------------------------------------------------------


def test_all_eight_testdata_manifests_are_present() -> None:
    assert len(testdata.manifests()) == 8


@pytest.mark.parametrize("path", testdata.manifests(), ids=lambda p: p.name)
def test_real_manifest_validates_cleanly_after_defaulting(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert len(docs) == 1
    ds = defaults.default(docs[0])
    assert ds["metadata"]["namespace"]
    assert validation.validate(ds) == []
    assert validation.validate(ds, old=copy.deepcopy(ds)) == []


# ---- rule 1: selector syntax -------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        (
            {"key": "app", "operator": "Foo"},
            'spec.selector.matchExpressions[0].operator: Invalid value: "Foo": '
            "not a valid selector operator",
        ),
        (
            {"key": "app", "operator": "Exists", "values": ["x"]},
            "spec.selector.matchExpressions[0].values: Forbidden: may not be specified when "
            "`operator` is 'Exists' or 'DoesNotExist'",
        ),
        (
            {"key": "app", "operator": "In"},
            "spec.selector.matchExpressions[0].values: Required value: must be specified when "
            "`operator` is 'In' or 'NotIn'",
        ),
        (
            {"key": "app", "operator": "In", "values": ["-x"]},
            'spec.selector.matchExpressions[0].values[0]: Invalid value: "-x": a valid label '
            "must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
            "or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
            "[A-Za-z0-9])?')",
        ),
    ],
)
def test_rule1_selector_expression_syntax(expression: Obj, error: str) -> None:
    ds = daemonset()
    ds["spec"]["selector"] = {"matchExpressions": [expression]}
    assert validation.validate(ds) == [error]


def test_rule1_selector_label_key_syntax() -> None:
    ds = daemonset()
    ds["spec"]["selector"] = {"matchLabels": {"bad key": "x"}}
    assert validation.validate(ds) == [
        f'spec.selector.matchLabels: Invalid value: "bad key": {QUALIFIED_NAME_MSG}'
    ]


# ---- rule 2: selector matches template labels ---------------------------------------------


def test_rule2_selector_must_match_template_labels() -> None:
    ds = daemonset()
    ds["spec"]["selector"] = {"matchLabels": {"app": "y"}}
    assert validation.validate(ds) == [
        'spec.template.metadata.labels: Invalid value: map[string]string{"app":"x"}: '
        "`selector` does not match template `labels`"
    ]


def test_rule2_nil_selector_matches_nothing() -> None:
    ds = daemonset()
    del ds["spec"]["selector"]
    assert validation.validate(ds) == [
        'spec.template.metadata.labels: Invalid value: map[string]string{"app":"x"}: '
        "`selector` does not match template `labels`"
    ]


def test_rule2_missing_template_labels_render_as_nil_map() -> None:
    ds = daemonset()
    del ds["spec"]["template"]["metadata"]
    assert validation.validate(ds) == [
        "spec.template.metadata.labels: Invalid value: map[string]string(nil): "
        "`selector` does not match template `labels`"
    ]


def test_rule2_is_skipped_when_the_selector_does_not_convert() -> None:
    ds = daemonset()
    ds["spec"]["selector"] = {"matchExpressions": [{"key": "other", "operator": "Foo"}]}
    assert len(validation.validate(ds)) == 1


# ---- rule 3: empty selector --------------------------------------------------------------


def test_rule3_empty_selector_is_invalid() -> None:
    ds = daemonset()
    ds["spec"]["selector"] = {}
    assert validation.validate(ds) == [
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for "
        "daemonset"
    ]


def test_rule3_selector_with_empty_parts_is_empty() -> None:
    ds = daemonset()
    ds["spec"]["selector"] = {"matchLabels": {}, "matchExpressions": []}
    assert validation.validate(ds) == [
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{}, "
        "MatchExpressions:[]v1.LabelSelectorRequirement{}}: empty selector is invalid for "
        "daemonset"
    ]


# ---- rule 4: pod template ----------------------------------------------------------------


def test_rule4_restart_policy_must_be_always() -> None:
    ds = daemonset()
    pod_spec(ds)["restartPolicy"] = "Never"
    assert validation.validate(ds) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"'
    ]


def test_rule4_unknown_restart_policy_fails_pod_and_daemonset_rules() -> None:
    ds = daemonset()
    pod_spec(ds)["restartPolicy"] = "Sometimes"
    assert validation.validate(ds) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
        '"Always", "OnFailure", "Never"',
        'spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
        '"Always"',
    ]


def test_rule4_active_deadline_seconds_is_forbidden() -> None:
    ds = daemonset()
    pod_spec(ds)["activeDeadlineSeconds"] = 30
    assert validation.validate(ds) == [
        "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in "
        "DaemonSet is not Supported"
    ]


def test_rule4_at_least_one_container() -> None:
    ds = daemonset()
    pod_spec(ds)["containers"] = []
    assert validation.validate(ds) == ["spec.template.spec.containers: Required value"]


def test_rule4_container_image_is_required() -> None:
    ds = daemonset()
    del pod_spec(ds)["containers"][0]["image"]
    assert validation.validate(ds) == ["spec.template.spec.containers[0].image: Required value"]


def test_rule4_container_name_is_required_and_a_dns_label() -> None:
    ds = daemonset()
    pod_spec(ds)["containers"][0]["name"] = "Bad_Name"
    assert validation.validate(ds) == [
        f'spec.template.spec.containers[0].name: Invalid value: "Bad_Name": {DNS1123_LABEL_MSG}'
    ]
    del pod_spec(ds)["containers"][0]["name"]
    assert validation.validate(ds) == ["spec.template.spec.containers[0].name: Required value"]


def test_rule4_container_names_are_unique() -> None:
    ds = daemonset()
    pod_spec(ds)["containers"].append({"name": "c", "image": "x:1"})
    pod_spec(ds)["initContainers"] = [{"name": "c", "image": "x:1"}]
    assert validation.validate(ds) == [
        'spec.template.spec.containers[1].name: Duplicate value: "c"',
        'spec.template.spec.initContainers[0].name: Duplicate value: "c"',
    ]


def test_rule4_template_label_errors_use_upstreams_path() -> None:
    ds = daemonset()
    ds["spec"]["template"]["metadata"]["labels"]["bad key"] = "v"
    assert validation.validate(ds) == [
        f'spec.template.labels: Invalid value: "bad key": {QUALIFIED_NAME_MSG}'
    ]


def test_rule4_toleration_exists_with_a_value_is_invalid() -> None:
    ds = daemonset()
    pod_spec(ds)["tolerations"] = [{"key": "k", "operator": "Exists", "value": "v"}]
    assert validation.validate(ds) == [
        'spec.template.spec.tolerations[0].operator: Invalid value: core.Toleration{Key:"k", '
        'Operator:"Exists", Value:"v", Effect:"", TolerationSeconds:(*int64)(nil)}: '
        "value must be empty when `operator` is 'Exists'"
    ]


def test_rule4_toleration_effect_must_be_known() -> None:
    ds = daemonset()
    pod_spec(ds)["tolerations"] = [{"key": "k", "effect": "NoWay"}]
    assert validation.validate(ds) == [
        'spec.template.spec.tolerations[0].effect: Unsupported value: "NoWay": supported '
        'values: "NoSchedule", "PreferNoSchedule", "NoExecute"'
    ]


def test_rule4_keyless_toleration_needs_exists() -> None:
    ds = daemonset()
    pod_spec(ds)["tolerations"] = [{"operator": "Equal", "effect": "NoSchedule"}]
    assert validation.validate(ds) == [
        'spec.template.spec.tolerations[0].operator: Invalid value: "Equal": operator must be '
        'Exists when `key` is empty, which means "match all values and all keys"'
    ]


def test_rule4_empty_toleration_operator_means_equal() -> None:
    ds = daemonset()
    pod_spec(ds)["tolerations"] = [
        {"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30}
    ]
    assert validation.validate(ds) == []


def test_rule4_volume_mounts_must_name_a_volume() -> None:
    ds = daemonset()
    pod_spec(ds)["containers"][0]["volumeMounts"] = [{"name": "logs", "mountPath": "/var/log"}]
    assert validation.validate(ds) == [
        'spec.template.spec.containers[0].volumeMounts[0].name: Not found: "logs"'
    ]


def test_rule4_host_path_types_and_paths_are_upstreams() -> None:
    ds = daemonset()
    pod_spec(ds)["volumes"] = [
        {"name": "a", "hostPath": {"path": "/var/log", "type": "Dir"}},
        {"name": "b", "hostPath": {"path": "/var/../etc", "type": "DirectoryOrCreate"}},
        {"name": "c", "hostPath": {"path": "/run/x.sock", "type": ""}},
    ]
    assert validation.validate(ds) == [
        'spec.template.spec.volumes[0].hostPath.type: Unsupported value: "Dir": supported '
        'values: "", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", '
        '"FileOrCreate", "Socket"',
        "spec.template.spec.volumes[1].hostPath.path: Invalid value: \"/var/../etc\": must "
        "not contain '..'",
    ]


def test_rule4_mount_propagation_and_sub_paths_are_checked_as_upstream() -> None:
    ds = daemonset()
    spec = pod_spec(ds)
    spec["volumes"] = [{"name": "pods", "hostPath": {"path": "/var/lib/kubelet/pods"}}]
    mounts = "spec.template.spec.containers[0].volumeMounts"
    spec["containers"][0]["volumeMounts"] = [
        {"name": "pods", "mountPath": "/a", "mountPropagation": "Bidirectional"},
        {"name": "pods", "mountPath": "/b", "mountPropagation": "Shared"},
        {"name": "pods", "mountPath": "/c", "subPath": "/abs"},
        {"name": "pods", "mountPath": "/d", "subPath": "x", "subPathExpr": "../$(X)"},
    ]
    assert validation.validate(ds) == [
        f"{mounts}.mountPropagation: Forbidden: Bidirectional mount propagation is available "
        "only to privileged containers",
        f'{mounts}.mountPropagation: Unsupported value: "Shared": supported values: '
        '"Bidirectional", "HostToContainer", "None"',
        f'{mounts}.subPath: Invalid value: "/abs": must be a relative path',
        f'{mounts}[3].subPathExpr: Invalid value: "../$(X)": subPathExpr and subPath are '
        "mutually exclusive",
        f"{mounts}.subPathExpr: Invalid value: \"../$(X)\": must not contain '..'",
    ]
    spec["containers"][0]["securityContext"] = {"privileged": True}
    del spec["containers"][0]["volumeMounts"][1:]
    assert validation.validate(ds) == []


def test_rule4_env_value_from_has_one_source_and_a_resource_the_downward_api_gives() -> None:
    ds = daemonset()
    env = "spec.template.spec.containers[0].env"
    pod_spec(ds)["containers"][0]["env"] = [
        {"name": "A", "valueFrom": {}},
        {"name": "B", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"},
                                    "resourceFieldRef": {"resource": "limits.cpu"}}},
        {"name": "D", "valueFrom": {"resourceFieldRef": {"resource": "limits.pods"}}},
        {"name": "E", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                         "divisor": "1k"}}},
        {"name": "F", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory",
                                                         "divisor": "2Mi"}}},
        {"name": "G", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                         "divisor": "1000m"}}},
        {"name": "H", "valueFrom": {"resourceFieldRef": {
            "resource": "limits.hugepages-2Mi", "divisor": "1Mi", "containerName": "c"}}},
    ]
    assert validation.validate(ds) == [
        f'{env}[0].valueFrom: Invalid value: "": must specify one of: `fieldRef`, '
        "`resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        f'{env}[1].valueFrom: Invalid value: "": may not be specified when `value` is not '
        "empty",
        f'{env}[2].valueFrom: Invalid value: "": may not have more than one field specified '
        "at a time",
        f'{env}[3].valueFrom.resourceFieldRef.resource: Unsupported value: "limits.pods": '
        'supported values: "limits.cpu", "limits.ephemeral-storage", "limits.memory", '
        '"requests.cpu", "requests.ephemeral-storage", "requests.memory"',
        f'{env}[4].valueFrom.resourceFieldRef.divisor: Invalid value: "limits.cpu": only '
        "divisor's values 1m and 1 are supported with the cpu resource",
        f'{env}[5].valueFrom.resourceFieldRef.divisor: Invalid value: "requests.memory": only '
        "divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are "
        "supported with the memory resource",
    ]


def test_rule4_dns_config_and_a_shared_process_namespace_as_upstream_checks_them() -> None:
    ds = daemonset()
    spec = pod_spec(ds)
    spec["dnsPolicy"] = "None"
    assert validation.validate(ds) == [
        "spec.template.spec.dnsConfig: Required value: must provide `dnsConfig` when "
        "`dnsPolicy` is None"]
    spec["dnsConfig"] = {"searches": ["svc.example."]}
    assert validation.validate(ds) == [
        "spec.template.spec.dnsConfig.nameservers: Required value: must provide at least one "
        "DNS nameserver when `dnsPolicy` is None"]
    spec["dnsConfig"] = {"nameservers": ["10.0.0.10", "1.1.1.1", "8.8.8.8", "nine"],
                         "searches": ["ok.example.", "Bad_Domain"], "options": [{"value": "2"}]}
    spec["shareProcessNamespace"] = True
    spec["hostPID"] = True
    dns = "spec.template.spec.dnsConfig"
    assert validation.validate(ds) == [
        "spec.template.spec.shareProcessNamespace: Invalid value: true: ShareProcessNamespace "
        "and HostPID cannot both be enabled",
        f'{dns}.nameservers: Invalid value: []string{{"10.0.0.10", "1.1.1.1", "8.8.8.8", '
        '"nine"}: must not have more than 3 nameservers',
        f'{dns}.nameservers[3]: Invalid value: "nine": must be a valid IP address, (e.g. '
        "10.9.8.7 or 2001:db8::ffff)",
        f'{dns}.searches[1]: Invalid value: "Bad_Domain": {DNS1123_SUBDOMAIN_MSG}',
        f"{dns}.options[0]: Required value: Option.Name must not be empty",
    ]


def test_rule4_node_affinity_operator_must_be_known() -> None:
    ds = daemonset()
    pod_spec(ds)["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Is"}]}]
            }
        }
    }
    assert validation.validate(ds) == [
        "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        '.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: "Is": not a valid '
        "selector operator"
    ]


# ---- rule 5: non-negative fields ----------------------------------------------------------


@pytest.mark.parametrize("field", ["minReadySeconds", "templateGeneration", "revisionHistoryLimit"])
def test_rule5_fields_must_not_be_negative(field: str) -> None:
    ds = daemonset()
    ds["spec"][field] = -1
    assert validation.validate(ds) == [
        f"spec.{field}: Invalid value: -1: must be greater than or equal to 0"
    ]


def test_rule5_zero_revision_history_limit_is_valid() -> None:
    ds = daemonset()
    ds["spec"]["revisionHistoryLimit"] = 0
    assert validation.validate(ds) == []


# ---- rules 6-9: update strategy ----------------------------------------------------------


def test_rule6_on_delete_ignores_the_rolling_update_stanza() -> None:
    ds = daemonset()
    ds["spec"]["updateStrategy"] = {"type": "OnDelete", "rollingUpdate": {"maxUnavailable": -5}}
    assert validation.validate(ds) == []


def test_rule6_rolling_update_needs_its_stanza() -> None:
    ds = daemonset()
    del ds["spec"]["updateStrategy"]["rollingUpdate"]
    assert validation.validate(ds) == ["spec.updateStrategy.rollingUpdate: Required value"]


def test_rule6_other_types_print_the_whole_strategy() -> None:
    # ValidateDaemonSetUpdateStrategy: field.NotSupported(fldPath, strategy, validValues) with
    # strategy a *apps.DaemonSetUpdateStrategy; field.Error prints what it points to with %#v
    ds = daemonset()
    ds["spec"]["updateStrategy"] = {"type": "Recreate"}
    assert validation.validate(ds) == [
        'spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:"Recreate", '
        'RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: '
        '"RollingUpdate", "OnDelete"'
    ]
    ds["spec"]["updateStrategy"]["rollingUpdate"] = {"maxUnavailable": 1}
    assert validation.validate(ds) == [
        'spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:"Recreate", '
        "RollingUpdate:(*apps.RollingUpdateDaemonSet)(0xc000000000)}: supported values: "
        '"RollingUpdate", "OnDelete"'
    ]


def test_rule7_negative_int_is_invalid() -> None:
    # ValidatePositiveIntOrPercent: ValidateNonnegativeField(int64(IntValue())): a plain int
    ds = daemonset()
    rolling(ds)["maxUnavailable"] = -1
    assert validation.validate(ds) == [
        f"{RU}.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"
    ]


def test_rule7_bad_percent_string_has_the_double_space_message() -> None:
    # ValidatePositiveIntOrPercent: field.Invalid(fldPath, intOrPercent, msg) with the
    # intstr.IntOrString value, which field.Error prints with %#v
    ds = daemonset()
    rolling(ds).update(maxUnavailable=0, maxSurge="ten")
    assert validation.validate(ds) == [
        f'{RU}.maxSurge: Invalid value: intstr.IntOrString{{Type:1, IntVal:0, StrVal:"ten"}}: '
        f"{PERCENT_MSG}",
        f"{RU}.maxUnavailable: Required value: cannot be 0 when maxSurge is 0",
    ]


def test_rule7_digit_string_without_percent_counts_by_its_number() -> None:
    ds = daemonset()
    rolling(ds).update(maxUnavailable="5", maxSurge=0)
    assert validation.validate(ds) == [
        f'{RU}.maxUnavailable: Invalid value: intstr.IntOrString{{Type:1, IntVal:0, StrVal:"5"}}: '
        f"{PERCENT_MSG}"
    ]


def test_rule8_percent_above_100_is_invalid_but_ints_are_not_capped() -> None:
    # IsNotMoreThan100Percent: field.Invalid(fldPath, intOrStringValue, ...), %#v
    ds = daemonset()
    rolling(ds)["maxUnavailable"] = "101%"
    assert validation.validate(ds) == [
        f'{RU}.maxUnavailable: Invalid value: intstr.IntOrString{{Type:1, IntVal:0, '
        'StrVal:"101%"}: must not be greater than 100%'
    ]
    rolling(ds)["maxUnavailable"] = 1000
    assert validation.validate(ds) == []


def test_rule9_both_non_zero_is_invalid() -> None:
    # ValidateRollingUpdateDaemonSet: field.Invalid(fldPath.Child("maxSurge"),
    # rollingUpdate.MaxSurge, ...) with the intstr.IntOrString value, %#v
    ds = daemonset()
    rolling(ds).update(maxUnavailable=1, maxSurge="10%")
    assert validation.validate(ds) == [
        f'{RU}.maxSurge: Invalid value: intstr.IntOrString{{Type:1, IntVal:0, StrVal:"10%"}}: '
        "may not be set when maxUnavailable is non-zero"
    ]
    rolling(ds).update(maxUnavailable="50%", maxSurge=2)
    assert validation.validate(ds) == [
        f'{RU}.maxSurge: Invalid value: intstr.IntOrString{{Type:0, IntVal:2, StrVal:""}}: '
        "may not be set when maxUnavailable is non-zero"
    ]


def test_rule9_both_zero_is_invalid() -> None:
    ds = daemonset()
    rolling(ds).update(maxUnavailable="0%", maxSurge=0)
    assert validation.validate(ds) == [
        f"{RU}.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"
    ]


def test_rule9_surge_only_is_valid() -> None:
    ds = daemonset()
    rolling(ds).update(maxUnavailable=0, maxSurge="25%")
    assert validation.validate(ds) == []


# ---- rule 10: metadata --------------------------------------------------------------------


def test_rule10_name_must_be_a_dns_subdomain() -> None:
    ds = daemonset()
    ds["metadata"]["name"] = "Bad_Name"
    assert validation.validate(ds) == [
        f'metadata.name: Invalid value: "Bad_Name": {DNS1123_SUBDOMAIN_MSG}'
    ]


def test_rule10_name_is_required() -> None:
    ds = daemonset()
    del ds["metadata"]["name"]
    assert validation.validate(ds) == [
        "metadata.name: Required value: name or generateName is required"
    ]


def test_rule10_namespace_must_be_a_dns_label() -> None:
    ds = daemonset()
    ds["metadata"]["namespace"] = "kube.system"
    assert validation.validate(ds) == [
        'metadata.namespace: Invalid value: "kube.system": must not contain dots'
    ]
    ds["metadata"]["namespace"] = "Bad_NS"
    assert validation.validate(ds) == [
        f'metadata.namespace: Invalid value: "Bad_NS": {DNS1123_LABEL_MSG}'
    ]


def test_rule10_label_keys_and_values() -> None:
    ds = daemonset()
    ds["metadata"]["labels"] = {"a/b/c": "x", "ok": "-bad"}
    errors = validation.validate(ds)
    assert len(errors) == 2
    assert errors[0].startswith('metadata.labels: Invalid value: "a/b/c": a qualified name must')
    assert errors[1].startswith('metadata.labels: Invalid value: "-bad": a valid label must be')


def test_rule10_labels_not_a_map_is_a_clear_error() -> None:
    ds = daemonset()
    ds["metadata"]["labels"] = ["app=x"]
    assert validation.validate(ds) == [
        'metadata.labels: Invalid value: []string{"app=x"}: must be of type object'
    ]


def test_rule10_label_value_must_be_a_string() -> None:
    ds = daemonset()
    ds["metadata"]["labels"] = {"version": 1}
    assert validation.validate(ds) == [
        "metadata.labels[version]: Invalid value: 1: must be of type string"
    ]


def test_rules_are_reported_in_upstream_order() -> None:
    # ValidateDaemonSet: ValidateObjectMeta, then ValidateDaemonSetSpec: selector, template
    # labels, pod template, restartPolicy, minReadySeconds, templateGeneration,
    # ValidateDaemonSetUpdateStrategy, and revisionHistoryLimit last
    ds = daemonset()
    ds["metadata"]["name"] = "Bad_Name"
    ds["spec"]["updateStrategy"]["type"] = "Recreate"
    ds["spec"]["minReadySeconds"] = -1
    ds["spec"]["templateGeneration"] = -1
    ds["spec"]["revisionHistoryLimit"] = -1
    pod_spec(ds)["restartPolicy"] = "Never"
    ds["spec"]["selector"] = {"matchLabels": {"app": "y"}}
    assert [e.split(":")[0] for e in validation.validate(ds)] == [
        "metadata.name",
        "spec.template.metadata.labels",
        "spec.template.spec.restartPolicy",
        "spec.minReadySeconds",
        "spec.templateGeneration",
        "spec.updateStrategy",
        "spec.revisionHistoryLimit",
    ]


# ---- update rules ------------------------------------------------------------------------


def test_update_selector_is_immutable() -> None:
    old = daemonset()
    new = daemonset()
    new["spec"]["selector"] = {"matchLabels": {"app": "x", "tier": "a"}}
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "a"
    assert validation.validate(new, old) == [
        'spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"x", '
        '"tier":"a"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable'
    ]


def test_update_selector_nil_and_empty_parts_compare_equal() -> None:
    old = daemonset()
    new = daemonset()
    new["spec"]["selector"]["matchExpressions"] = []
    assert validation.validate(new, old) == []


def test_update_name_is_immutable() -> None:
    new = daemonset()
    new["metadata"]["name"] = "other"
    assert validation.validate(new, daemonset()) == [
        'metadata.name: Invalid value: "other": field is immutable'
    ]


def test_update_template_generation_rules() -> None:
    old = daemonset()
    old["spec"]["templateGeneration"] = 2
    new = copy.deepcopy(old)
    new["spec"]["templateGeneration"] = 1
    assert "spec.templateGeneration: Invalid value: 1: must not be decremented" in (
        validation.validate(new, old)
    )
    new["spec"]["templateGeneration"] = 3
    assert validation.validate(new, old) == [
        "spec.templateGeneration: Invalid value: 3: must not be incremented without template update"
    ]
    new["spec"]["templateGeneration"] = 2
    pod_spec(new)["containers"][0]["image"] = "fluentd:v2"
    assert validation.validate(new, old) == [
        "spec.templateGeneration: Invalid value: 2: must be incremented upon template update"
    ]


# ---- status ------------------------------------------------------------------------------


def test_status_counters_must_not_be_negative() -> None:
    assert validation.validate_daemonset_status({"numberReady": -1, "observedGeneration": -2}) == [
        "status.numberReady: Invalid value: -1: must be greater than or equal to 0",
        "status.observedGeneration: Invalid value: -2: must be greater than or equal to 0",
    ]


def test_status_collision_count_cannot_be_decremented() -> None:
    assert validation.validate_daemonset_status({"collisionCount": 1}, {"collisionCount": 2}) == [
        "status.collisionCount: Invalid value: 1: cannot be decremented"
    ]
    assert validation.validate_daemonset_status({}, {"collisionCount": 2}) == [
        "status.collisionCount: Invalid value: 0: cannot be decremented"
    ]
    assert validation.validate_daemonset_status({"collisionCount": 3}, {"collisionCount": 2}) == []
    assert validation.validate_daemonset_status({"collisionCount": 0}, {}) == []


# ---- other kinds -------------------------------------------------------------------------


def test_node_is_cluster_scoped_and_taints_are_checked() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1", "namespace": "x"},
        "spec": {
            "taints": [
                {"key": "a", "effect": "NoSchedule"},
                {"key": "a", "effect": "NoSchedule"},
                {"key": "b"},
            ]
        },
    }
    assert validation.validate(node) == [
        "metadata.namespace: Forbidden: not allowed on this type",
        'metadata.taints[1]: Duplicate value: core.Taint{Key:"a", Value:"", Effect:"NoSchedule", '
        "TimeAdded:(*v1.Time)(nil)}: taints must be unique by key and effect pair",
        "metadata.taints[2].effect: Required value",
    ]


def test_valid_node() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1"},
        "status": {"capacity": {"pods": "110", "cpu": 4}},
    }
    assert validation.validate(defaults.default(node)) == []


def test_pod_needs_containers_with_images() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": [{"name": "c"}]},
    }
    assert validation.validate(defaults.default(pod)) == [
        "spec.containers[0].image: Required value"
    ]
    pod["spec"] = {}
    assert validation.validate(defaults.default(pod)) == ["spec.containers: Required value"]


def test_pod_with_daemonset_node_affinity_is_valid() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "fluentd-", "name": "fluentd-abcde", "namespace": "d"},
        "spec": {
            "containers": [{"name": "c", "image": "x:1"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                                ]
                            }
                        ]
                    }
                }
            },
        },
        "status": {"phase": "Running"},
    }
    assert validation.validate(defaults.default(pod)) == []


def test_pod_phase_must_be_known() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": [{"name": "c", "image": "x:1"}]},
        "status": {"phase": "Done"},
    }
    assert validation.validate(defaults.default(pod)) == [
        'status.phase: Unsupported value: "Done": supported values: "Pending", "Running", '
        '"Succeeded", "Failed", "Unknown"'
    ]


def test_controller_revision_needs_data_and_non_negative_revision() -> None:
    cr = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": "fluentd-5d4f8", "namespace": "d"},
        "revision": -1,
    }
    assert validation.validate(cr) == [
        "data: Required value: data is mandatory",
        "revision: Invalid value: -1: must be greater than or equal to 0",
    ]
    cr.update(revision=1, data={"spec": {}})
    assert validation.validate(cr) == []


def test_controller_revision_data_is_immutable() -> None:
    cr = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": "r", "namespace": "d"},
        "revision": 1,
        "data": {"a": "b"},
    }
    new = copy.deepcopy(cr)
    new["data"] = {"a": "c"}
    assert validation.validate(new, cr) == [
        'data: Invalid value: map[string]string{"a":"c"}: field is immutable'
    ]


def test_event_involved_object_namespace_must_match() -> None:
    ev: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "fluentd.17a", "namespace": "d"},
        "involvedObject": {"kind": "DaemonSet", "namespace": "other", "name": "fluentd"},
        "reason": "SuccessfulCreate",
        "type": "Normal",
        "count": 1,
    }
    assert validation.validate(ev) == [
        'involvedObject.namespace: Invalid value: "other": does not match event.namespace'
    ]
    ev["involvedObject"]["namespace"] = "d"
    assert validation.validate(ev) == []


# ---- dispatch ----------------------------------------------------------------------------


def test_unknown_kind_or_version_gives_one_error() -> None:
    assert validation.validate({"apiVersion": "v9", "kind": "Foo"}) == [
        'no matches for kind "Foo" in version "v9"'
    ]
    assert validation.validate({"apiVersion": "extensions/v1beta1", "kind": "DaemonSet"}) == [
        'no matches for kind "DaemonSet" in version "extensions/v1beta1"'
    ]


def test_missing_kind_and_api_version() -> None:
    assert validation.validate({}) == ["kind: Required value"]
    assert validation.validate({"kind": "Pod"}) == ["apiVersion: Required value"]


def test_non_object_is_one_error() -> None:
    assert validation.validate([1, 2]) == [
        "object: Invalid value: []interface {}{1, 2}: must be of type object"
    ]


def test_wrong_types_are_reported_not_raised() -> None:
    ds = daemonset()
    ds["spec"]["template"]["spec"]["containers"] = "fluentd"
    ds["spec"]["minReadySeconds"] = "10"
    ds["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] = 1.5
    assert validation.validate(ds) == [
        'spec.template.spec.containers: Invalid value: "fluentd": must be of type array',
        'spec.minReadySeconds: Invalid value: "10": must be of type int32',
        f"{RU}.maxSurge: Invalid value: 1.5: must be an integer or percentage (e.g '5%')",
    ]


def test_unknown_fields_are_fine() -> None:
    ds = daemonset()
    ds["spec"]["someFutureField"] = {"x": [1, 2]}
    pod_spec(ds)["containers"][0]["someFutureField"] = True
    assert validation.validate(ds) == []


# ---- ephemeral containers ------------------------------------------------------------------


EPH = "spec.ephemeralContainers"


def debugged_pod(*ephemeral: Obj, **spec: Any) -> Obj:
    """A defaulted pod with a container ``c``, an init container ``i``, a volume ``logs``
    and the ephemeral containers given (as the subresource would store them)."""
    pod: Obj = defaults.default({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": [{"name": "c", "image": "x:1"}],
                 "initContainers": [{"name": "i", "image": "x:1"}],
                 "volumes": [{"name": "logs", "emptyDir": {}}],
                 "ephemeralContainers": list(ephemeral), **spec},
    })
    return pod


def test_a_pod_with_valid_ephemeral_containers_has_no_errors() -> None:
    pod = debugged_pod(
        {"name": "debugger", "image": "busybox:1", "targetContainerName": "c", "stdin": True,
         "tty": True, "command": ["sh"], "env": [{"name": "A", "value": "1"}],
         "volumeMounts": [{"name": "logs", "mountPath": "/logs"}],
         "securityContext": {"privileged": True}, "resources": {}},
        {"name": "debugger-2", "image": "busybox:1", "targetContainerName": "i"})
    assert validation.validate(pod) == []
    assert validation.validate_pod(pod) == []  # a read of a stored pod: no create rule


def test_ephemeral_containers_are_validated_like_containers() -> None:
    pod = debugged_pod(
        {"name": "Bad_Name", "volumeMounts": [{"name": "nope", "mountPath": "/x"}],
         "env": [{"value": "1"}], "imagePullPolicy": "Sometimes"})
    assert validation.validate(pod) == [
        f'{EPH}[0].name: Invalid value: "Bad_Name": {DNS1123_LABEL_MSG}',
        f"{EPH}[0].image: Required value",
        f"{EPH}[0].env[0].name: Required value",
        f'{EPH}[0].volumeMounts[0].name: Not found: "nope"',
        f'{EPH}[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: '
        '"Always", "IfNotPresent", "Never"',
    ]


def test_ephemeral_container_names_are_unique_across_every_container() -> None:
    pod = debugged_pod({"name": "c", "image": "x:1"}, {"name": "i", "image": "x:1"},
                       {"name": "e", "image": "x:1"}, {"name": "e", "image": "x:1"})
    assert validation.validate(pod) == [
        f'{EPH}[0].name: Duplicate value: "c"',
        f'{EPH}[1].name: Duplicate value: "i"',
        f'{EPH}[3].name: Duplicate value: "e"',
    ]


def test_ephemeral_container_targets_a_regular_or_init_container() -> None:
    pod = debugged_pod({"name": "e", "image": "x:1"},
                       {"name": "f", "image": "x:1", "targetContainerName": "e"},
                       {"name": "g", "image": "x:1", "targetContainerName": "nope"})
    assert validation.validate(pod) == [
        f'{EPH}[1].targetContainerName: Not found: "e"',
        f'{EPH}[2].targetContainerName: Not found: "nope"',
    ]


def test_ephemeral_container_may_not_set_what_upstreams_allow_list_leaves_out() -> None:
    probe = {"exec": {"command": ["true"]}}
    pod = debugged_pod({"name": "e", "image": "x:1", "lifecycle": {}, "startupProbe": probe,
                        "readinessProbe": probe, "livenessProbe": probe,
                        "restartPolicy": "Always",
                        "resizePolicy": [{"resourceName": "cpu",
                                          "restartPolicy": "NotRequired"}],
                        "resources": {"limits": {"cpu": "1"}},
                        "ports": [{"containerPort": 80}]})
    forbidden = ["ports", "resources", "resizePolicy", "restartPolicy", "livenessProbe",
                 "readinessProbe", "startupProbe", "lifecycle"]  # the struct's order
    assert validation.validate(pod) == [
        f"{EPH}[0].{f}: Forbidden: cannot be set for an Ephemeral Container"
        for f in forbidden]


@pytest.mark.parametrize(("field", "value", "refused"), [
    ("ports", [], True),  # a non-nil slice is not Go's zero value
    ("ports", None, False),
    ("resources", {}, False),  # the struct's zero value
    ("resources", {"requests": {}}, True),
    ("lifecycle", {}, True),  # a non-nil pointer
    ("restartPolicy", None, False),
])
def test_ephemeral_container_field_counts_as_set_when_go_would_not_read_it_as_zero(
        field: str, value: Any, refused: bool) -> None:
    pod = debugged_pod({"name": "e", "image": "x:1", field: value})
    expected = f"{EPH}[0].{field}: Forbidden: cannot be set for an Ephemeral Container"
    assert validation.validate(pod) == ([expected] if refused else [])


def test_ephemeral_container_volume_mounts_may_not_use_sub_paths() -> None:
    pod = debugged_pod({"name": "e", "image": "x:1", "volumeMounts": [
        {"name": "logs", "mountPath": "/a"},
        {"name": "logs", "mountPath": "/b", "subPath": "x"},
        {"name": "logs", "mountPath": "/c", "subPathExpr": "$(X)"},
    ]})
    assert validation.validate(pod) == [
        f"{EPH}[0].volumeMounts[1].subPath: Forbidden: cannot be set for an Ephemeral Container",
        f"{EPH}[0].volumeMounts[2].subPathExpr: Forbidden: cannot be set for an Ephemeral "
        "Container",
    ]


def test_ephemeral_container_image_has_no_surrounding_spaces_and_fields_their_types() -> None:
    pod = debugged_pod({"name": "e", "image": " x:1", "targetContainerName": 3, "stdin": "yes",
                        "stdinOnce": 1, "tty": None},
                       {"name": "f", "image": "x:1"}, "not-a-container")  # type: ignore[arg-type]
    assert validation.validate(pod) == [
        f'{EPH}[2]: Invalid value: "not-a-container": must be of type object',
        f'{EPH}[0].image: Invalid value: " x:1": must not have leading or trailing whitespace',
        f"{EPH}[0].targetContainerName: Invalid value: 3: must be of type string",
        f'{EPH}[0].stdin: Invalid value: "yes": must be of type boolean',
        f"{EPH}[0].stdinOnce: Invalid value: 1: must be of type boolean",
    ]
    pod["spec"]["ephemeralContainers"] = {"name": "e"}
    assert validation.validate(pod) == [
        f'{EPH}: Invalid value: map[string]string{{"name":"e"}}: must be of type array']


def test_ephemeral_containers_are_checked_after_init_containers() -> None:
    pod = debugged_pod({"name": "e", "image": "x:1", "ports": [{"containerPort": 80}]},
                       restartPolicy="Sometimes")
    pod["spec"]["initContainers"][0]["image"] = ""
    assert validation.validate(pod) == [
        "spec.initContainers[0].image: Required value",
        f"{EPH}[0].ports: Forbidden: cannot be set for an Ephemeral Container",
        'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
        '"OnFailure", "Never"',
    ]


def test_a_pod_template_still_refuses_ephemeral_containers_and_checks_them() -> None:
    ds = daemonset()
    pod_spec(ds)["ephemeralContainers"] = [{"name": "c", "image": "x:1"}]
    assert validation.validate(ds) == [
        'spec.template.spec.ephemeralContainers[0].name: Duplicate value: "c"',
        "spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed "
        "in pod template",
    ]


def test_a_pod_may_not_be_created_with_ephemeral_containers() -> None:
    pod = debugged_pod({"name": "e", "image": "x:1"})
    assert validation.validate_pod_create(pod) == [
        "spec.ephemeralContainers: Forbidden: cannot be set on create"]
    assert validation.validate_pod(pod) == []  # not the rule of any read or later write
    assert validation.shape_errors("Pod", pod) == []
    assert validation.validate_pod_create(debugged_pod()) == []  # an empty list is none
    assert validation.validate_pod_create(daemonset()) == []  # only a Pod's rule
