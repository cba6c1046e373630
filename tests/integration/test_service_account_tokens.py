"""ServiceAccount tokens through the real kubectl and the official Python client against a
live stack: ``kubectl create token``, the token as a bearer (who it is, what RBAC grants
it, a 403 beyond), upstream's refusals, a token revoked by the deletion of what it names,
one signed by another key refused, and a second API server of the cluster taking the
first's tokens."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from tests.integration import apiserver_kit
from tests.integration.apiserver_kit import ApiServer, free_port
from tests.integration.stack import Stack, wait_for

SA = "system:serviceaccount:logs:fluentd"
UNAUTHORIZED = "error: You must be logged in to the server (Unauthorized)\n"


@pytest.fixture
def api(stack: Stack, tmp_path: Path) -> ApiServer:
    server = apiserver_kit.in_front(stack, tmp_path, nodes=1)
    server.kubectl("create", "namespace", "logs")
    server.kubectl("create", "serviceaccount", "fluentd", "-n", "logs")
    server.kubectl("create", "clusterrole", "reader", "--verb=get,list,watch",
                   "--resource=pods,namespaces")
    server.kubectl("create", "clusterrolebinding", "reader", "--clusterrole=reader",
                   "--serviceaccount=logs:fluentd")
    return server


def test_kubectl_create_token_gives_a_bearer_that_is_the_service_account(
        api: ApiServer) -> None:
    token = api.kubectl("create", "token", "fluentd", "-n", "logs").stdout.strip()
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["sub"] == SA and claims["exp"] - claims["iat"] == 3600
    whoami = api.kubectl("auth", "whoami", "--token", token).stdout
    assert f"Username    {SA}" in whoami, whoami
    assert "[system:serviceaccounts system:serviceaccounts:logs system:authenticated]" in whoami
    assert wait_for(lambda: api.kubectl("auth", "can-i", "list", "pods", "-A", "--token",
                                        token, check=False).stdout == "yes\n")
    assert api.kubectl("get", "pods", "-A", "-o", "name", "--token", token).returncode == 0
    assert api.kubectl("get", "secrets", "-n", "logs", "--token", token,
                       check=False).stderr == (
        f'Error from server (Forbidden): secrets is forbidden: User "{SA}" cannot list '
        'resource "secrets" in API group "" in the namespace "logs"\n')
    denied = api.kubectl("create", "namespace", "x", "--token", token, check=False)
    assert "cannot create resource \"namespaces\"" in denied.stderr
    api.kubectl("delete", "serviceaccount", "fluentd", "-n", "logs")
    wait_for(lambda: api.kubectl("get", "pods", "--token", token, check=False).stderr
             == UNAUTHORIZED, what="the deleted ServiceAccount's token to be refused")


def test_upstreams_refusals_and_a_token_bound_to_a_secret(api: ApiServer) -> None:
    assert api.kubectl("create", "token", "fluentd", "-n", "logs", "--duration=5m",
                       check=False).stderr == (
        'error: failed to create token: TokenRequest.authentication.k8s.io "" is invalid: '
        "spec.expirationSeconds: Invalid value: 300: may not specify a duration less than "
        "10 minutes\n")
    assert api.kubectl("create", "token", "nope", "-n", "logs", check=False).stderr == \
        'error: failed to create token: serviceaccounts "nope" not found\n'
    assert "cannot create resource \"serviceaccounts/token\"" in api.kubectl(
        "create", "token", "fluentd", "-n", "logs", user="viewer", check=False).stderr
    api.kubectl("create", "secret", "generic", "s", "-n", "logs", "--from-literal=a=b")
    token = api.kubectl("create", "token", "fluentd", "-n", "logs", "--duration=2h",
                        "--bound-object-kind=Secret", "--bound-object-name=s").stdout.strip()
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 7200
    assert claims["kubernetes.io"]["secret"]["name"] == "s"
    assert api.kubectl("get", "pods", "-n", "logs", "--token", token).returncode == 0
    api.kubectl("delete", "secret", "s", "-n", "logs")
    wait_for(lambda: api.kubectl("get", "pods", "-n", "logs", "--token", token,
                                 check=False).stderr == UNAUTHORIZED,
             what="the token bound to a deleted Secret to be refused")


def test_a_token_another_key_signed_is_refused(api: ApiServer) -> None:
    real = api.kubectl("create", "token", "fluentd", "-n", "logs").stdout.strip()
    claims = jwt.decode(real, options={"verify_signature": False})
    header = jwt.get_unverified_header(real)
    forged = jwt.encode(claims, ec.generate_private_key(ec.SECP256R1()), algorithm="ES256",
                        headers={"kid": header["kid"]})
    assert api.kubectl("get", "pods", "--token", forged, check=False).stderr == UNAUTHORIZED
    code, body = api.request("GET", "/api/v1/pods", token=forged)
    assert code == 401 and body["reason"] == "Unauthorized"


def test_every_api_server_of_the_cluster_takes_the_tokens_of_another(api: ApiServer) -> None:
    token = api.kubectl("create", "token", "fluentd", "-n", "logs").stdout.strip()
    port = free_port()
    api.start("apiserver-2", port)  # the same --cert-dir: the same key
    code, body = api.request("GET", "/api/v1/namespaces/logs/pods", token=token, port=port)
    assert code == 200 and body["kind"] == "PodList", body


def test_the_python_client_asks_for_a_token_and_uses_it(api: ApiServer) -> None:
    admin = client.CoreV1Api(config.new_client_from_config(config_file=str(api.kubeconfig())))
    answer = admin.create_namespaced_service_account_token(
        "fluentd", "logs", client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600)))
    assert answer.spec.expiration_seconds == 600 and answer.status.expiration_timestamp
    cfg = client.Configuration()
    cfg.host = api.url
    cfg.ssl_ca_cert = str(api.cert_dir / "ca.crt")
    cfg.api_key = {"authorization": answer.status.token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    core = client.CoreV1Api(client.ApiClient(cfg))
    assert "logs" in [ns.metadata.name for ns in core.list_namespace().items]
    assert core.list_namespaced_pod("logs").items == []
    with pytest.raises(ApiException) as err:
        core.list_namespaced_secret("logs")
    assert err.value.status == 403
    assert json.loads(err.value.body)["message"].startswith(f'secrets is forbidden: User "{SA}"')


def test_a_delegate_reviews_tokens_and_access_and_the_issuer_publishes_its_keys(
        api: ApiServer, tmp_path: Path) -> None:
    """TokenReview and SubjectAccessReview, as a proxy in front of an agent's metrics asks
    (kube-rbac-proxy), for one granted their create; the issuer's OpenID discovery and
    keys, with which a system outside the cluster checks a token itself."""
    token = api.kubectl("create", "token", "fluentd", "-n", "logs").stdout.strip()
    vault = api.kubectl("create", "token", "fluentd", "-n", "logs", "--audience",
                        "vault").stdout.strip()
    review = tmp_path / "review.json"

    def post(doc: dict[str, object], *args: str) -> subprocess.CompletedProcess[str]:
        review.write_text(json.dumps(doc))
        return api.kubectl("create", "-f", str(review), "-o", "json", *args, check=False)

    def token_review(t: str, audiences: list[str] | None = None) -> Any:
        spec: dict[str, object] = {"token": t, **({"audiences": audiences} if audiences else {})}
        got = post({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                    "spec": spec})
        return json.loads(got.stdout)["status"]

    assert token_review(token)["user"]["username"] == SA
    assert token_review(vault)["authenticated"] is False  # not for the API server
    assert token_review(vault, ["vault"])["audiences"] == ["vault"]
    assert token_review("nonsense") == {"authenticated": False, "user": {},
                                        "error": "invalid bearer token"}
    sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
           "spec": {"user": SA, "groups": ["system:serviceaccounts"],
                    "resourceAttributes": {"verb": "list", "resource": "pods",
                                           "namespace": "logs"}}}
    assert json.loads(post(sar).stdout)["status"] == {
        "allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "reader" of '
        'ClusterRole "reader" to ServiceAccount "fluentd/logs"'}
    denied = post(sar, "--token", token)  # the ServiceAccount may not review others
    assert ('subjectaccessreviews.authorization.k8s.io is forbidden: User "'
            f'{SA}" cannot create resource "subjectaccessreviews" in API group '
            '"authorization.k8s.io" at the cluster scope') in denied.stderr, denied.stderr
    api.kubectl("create", "clusterrole", "delegate", "--verb=create",
                "--resource=tokenreviews.authentication.k8s.io,"
                "subjectaccessreviews.authorization.k8s.io")
    api.kubectl("create", "clusterrolebinding", "delegate", "--clusterrole=delegate",
                "--serviceaccount=logs:fluentd")
    wait_for(lambda: post(sar, "--token", token).returncode == 0,
             what="the binding to let the ServiceAccount review")
    config_doc = json.loads(api.kubectl("get", "--raw", "/.well-known/openid-configuration",
                                        "--token", token).stdout)
    assert config_doc["issuer"] == "https://kubernetes.default.svc.cluster.local"
    keys = json.loads(api.kubectl("get", "--raw", "/openid/v1/jwks").stdout)["keys"]
    claims = jwt.decode(vault, jwt.PyJWK(keys[0]).key, algorithms=["ES256"], audience="vault")
    assert claims["sub"] == SA


def test_a_service_account_reads_discovery_but_metrics_only_when_granted(
        api: ApiServer) -> None:
    token = api.kubectl("create", "token", "fluentd", "-n", "logs").stdout.strip()
    assert "apps/v1" in api.kubectl("api-versions", "--token", token).stdout
    refused = api.kubectl("get", "--raw", "/metrics", "--token", token, check=False)
    assert refused.stderr == (f'Error from server (Forbidden): forbidden: User "{SA}" cannot '
                              'get path "/metrics"\n'), refused.stderr
    assert api.kubectl("get", "--raw", "/metrics", user="viewer").returncode == 0
    api.kubectl("create", "clusterrole", "scraper", "--verb=get", "--non-resource-url=/metrics")
    api.kubectl("create", "clusterrolebinding", "scraper", "--clusterrole=scraper",
                "--serviceaccount=logs:fluentd")
    wait_for(lambda: "apiserver_" in api.kubectl("get", "--raw", "/metrics", "--token", token,
                                                 check=False).stdout,
             what="the binding to let the ServiceAccount scrape")
