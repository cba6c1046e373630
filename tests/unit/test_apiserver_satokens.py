"""ServiceAccount tokens (services.apiserver.satokens): a TokenRequest answered as upstream's
TokenREST answers it, and a token authenticating only while everything it names holds."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from services.apiserver import auth, satokens
from services.apiserver.status import ApiError

NOW = 1_800_000_000.0


def obj(kind: str, name: str, ns: str = "logs", uid: str = "",
        spec: dict[str, Any] | None = None) -> dict[str, Any]:
    out = {"kind": kind, "metadata": {"name": name, "namespace": ns,
                                      "uid": uid or f"uid-{kind}-{name}"}}
    return {**out, "spec": spec} if spec is not None else out


def world(*extra: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for o in (obj("ServiceAccount", "fluentd"), *extra):
        out.setdefault(o["kind"], {})[f"{o['metadata']['namespace']}/{o['metadata']['name']}"] = o
    return out


@pytest.fixture
def issuer() -> satokens.Issuer:
    return satokens.Issuer(ec.generate_private_key(ec.SECP256R1()))


def token_of(issuer: satokens.Issuer, objects: Any, spec: Any = None, **kw: Any) -> str:
    answer = issuer.answer("logs", "fluentd", {"spec": spec or {}}, objects, now=NOW, **kw)
    return str(answer["status"]["token"])


def bearer(token: str) -> str:
    return f"Bearer {token}"


def test_a_token_request_is_answered_with_upstreams_defaults_and_claims(
        issuer: satokens.Issuer) -> None:
    answer = issuer.answer("logs", "fluentd", {"kind": "TokenRequest", "spec": {}}, world(),
                           now=NOW)
    assert answer["spec"] == {"audiences": ["https://kubernetes.default.svc.cluster.local"],
                              "expirationSeconds": 3600, "boundObjectRef": None}
    assert answer["status"]["expirationTimestamp"] == "2027-01-15T09:00:00Z"
    assert answer["metadata"]["uid"] == "uid-ServiceAccount-fluentd"
    header = jwt.get_unverified_header(answer["status"]["token"])
    assert header["alg"] == "ES256" and header["kid"] == issuer.kid
    claims = jwt.decode(answer["status"]["token"], options={"verify_signature": False})
    assert claims["sub"] == "system:serviceaccount:logs:fluentd"
    assert claims["iss"] == satokens.ISSUER and claims["exp"] - claims["iat"] == 3600
    assert claims["kubernetes.io"] == {"namespace": "logs", "serviceaccount": {
        "name": "fluentd", "uid": "uid-ServiceAccount-fluentd"}}


@pytest.mark.parametrize(("spec", "message"), [
    ({"expirationSeconds": 599}, 'TokenRequest.authentication.k8s.io "" is invalid: '
     "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 "
     "minutes"),
    ({"expirationSeconds": (1 << 32) + 1}, "may not specify a duration larger than 2^32"),
    ({"expirationSeconds": "1h"}, "spec.expirationSeconds: must be an integer"),
    ({"audiences": "api"}, "spec.audiences: must be a list of strings"),
    ({"boundObjectRef": {"kind": "Deployment", "apiVersion": "apps/v1", "name": "d"}},
     "cannot bind token to object of type apps/v1, Kind=Deployment"),
    ({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "gone"}},
     'pods "gone" not found'),
    ({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "other"}},
     'cannot bind token for serviceaccount "fluentd" to pod running with different '
     "serviceaccount name."),
    ({"boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "s", "uid": "u2"}},
     'Operation cannot be fulfilled on Secret "s": the UID in the bound object reference (u2) '
     "does not match the UID in record. The object might have been deleted and then "
     "recreated"),
])
def test_a_bad_token_request_is_refused_in_upstreams_words(issuer: satokens.Issuer,
                                                          spec: Any, message: str) -> None:
    objects = world(obj("Pod", "other", spec={"serviceAccountName": "default"}),
                    obj("Secret", "s"))
    with pytest.raises(ApiError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("^", r"\^")):
        issuer.answer("logs", "fluentd", {"spec": spec}, objects, now=NOW)


def test_a_token_request_naming_another_service_account_is_refused(
        issuer: satokens.Issuer) -> None:
    for md, message in (({"name": "other"}, 'TokenRequest.authentication.k8s.io "fluentd" is '
                         'invalid: metadata.name: Invalid value: "other": must match the '
                         "service account name if specified"),
                        ({"namespace": "kube-system"}, "must match the service account "
                         "namespace if specified")):
        with pytest.raises(ApiError, match=message):
            issuer.answer("logs", "fluentd", {"metadata": md}, world(), now=NOW)
    same = {"metadata": {"name": "fluentd", "namespace": "logs"}}
    assert issuer.answer("logs", "fluentd", same, world(), now=NOW)["status"]["token"]


def test_a_token_for_a_service_account_that_does_not_exist_is_a_404(
        issuer: satokens.Issuer) -> None:
    with pytest.raises(ApiError) as err:
        issuer.answer("logs", "nope", {}, world(), now=NOW)
    assert err.value.code == 404 and err.value.status["message"] == \
        'serviceaccounts "nope" not found'


def test_a_token_authenticates_as_its_service_account_while_it_holds(
        issuer: satokens.Issuer) -> None:
    objects = world()
    token = token_of(issuer, objects)
    user = issuer.authenticate(bearer(token), objects, now=NOW + 10)
    assert user == auth.User("system:serviceaccount:logs:fluentd", auth.NO_ROLE, (
        "system:serviceaccounts", "system:serviceaccounts:logs", "system:authenticated"))
    assert issuer.authenticate(bearer(token), objects, now=NOW + 3600) is None  # expired
    assert issuer.authenticate(bearer(token), {}, now=NOW + 10) is None  # its SA is gone
    again = world(obj("ServiceAccount", "fluentd", uid="another"))  # deleted and made again
    assert issuer.authenticate(bearer(token), again, now=NOW + 10) is None
    assert issuer.authenticate(token, objects, now=NOW + 10) is None  # not a bearer header


def test_a_token_for_another_audience_or_signed_by_another_key_is_no_one(
        issuer: satokens.Issuer) -> None:
    objects = world()
    elsewhere = token_of(issuer, objects, {"audiences": ["vault"]})
    assert issuer.authenticate(bearer(elsewhere), objects, now=NOW + 10) is None
    stranger = satokens.Issuer(ec.generate_private_key(ec.SECP256R1()))
    forged = token_of(stranger, objects)
    assert issuer.authenticate(bearer(forged), objects, now=NOW + 10) is None
    claims = jwt.decode(token_of(issuer, objects), options={"verify_signature": False})
    unsigned = jwt.encode(claims, None, algorithm="none")
    assert issuer.authenticate(bearer(unsigned), objects, now=NOW + 10) is None
    assert issuer.authenticate("Bearer a.b.c", objects, now=NOW + 10) is None


def test_a_bound_token_holds_while_its_object_does(issuer: satokens.Issuer) -> None:
    pod = obj("Pod", "agent-x", spec={"serviceAccountName": "fluentd", "nodeName": "n1"})
    node = obj("Node", "n1", ns="")
    objects = world(pod, node)
    token = token_of(issuer, objects, {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                                          "name": "agent-x"}})
    claims = jwt.decode(token, options={"verify_signature": False})["kubernetes.io"]
    assert claims["pod"] == {"name": "agent-x", "uid": "uid-Pod-agent-x"}
    assert claims["node"] == {"name": "n1", "uid": "uid-Node-n1"}  # named, as upstream's
    assert issuer.authenticate(bearer(token), objects, now=NOW + 10) is not None
    assert issuer.authenticate(bearer(token), world(pod), now=NOW + 10) is not None
    assert issuer.authenticate(bearer(token), world(node), now=NOW + 10) is None  # pod gone
    deleting = dict(pod, metadata={**pod["metadata"],
                                   "deletionTimestamp": "2027-01-15T08:00:00Z"})
    dying = world(deleting, node)
    assert issuer.authenticate(bearer(token), dying, now=NOW + 30) is not None
    assert issuer.authenticate(bearer(token), dying, now=NOW + 61) is None  # a minute later


def test_the_signing_key_is_made_once_private_and_must_be_p256(tmp_path: Path) -> None:
    path = tmp_path / "pki" / "sa.key"
    first = satokens.load_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert satokens.load_key(path).private_numbers() == first.private_numbers()
    assert list((tmp_path / "pki").iterdir()) == [path]  # nothing left beside it
    other = tmp_path / "rsa.key"
    other.write_bytes(rsa.generate_private_key(65537, 2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    with pytest.raises(satokens.SigningKeyError, match="want a P-256 EC private key"):
        satokens.load_key(other)
    (tmp_path / "junk.key").write_text("junk")
    with pytest.raises(satokens.SigningKeyError, match="cannot use"):
        satokens.load_key(tmp_path / "junk.key")


def test_a_token_for_other_audiences_is_identified_for_those_only(
        issuer: satokens.Issuer) -> None:
    objects = world()
    token = token_of(issuer, objects, {"audiences": ["vault", "other"]})
    info, held = issuer.identify(token, objects, now=NOW + 1, audiences=["vault"]) or ({}, [])
    assert held == ["vault"] and info["username"] == "system:serviceaccount:logs:fluentd"
    assert info["uid"] == "uid-ServiceAccount-fluentd"
    assert list(info["extra"]) == ["authentication.kubernetes.io/credential-id"]
    assert issuer.identify(token, objects, now=NOW + 1) is None  # not the API server's


def test_the_published_keys_check_the_tokens(issuer: satokens.Issuer) -> None:
    token = token_of(issuer, world())
    [key] = satokens.jwks(issuer)["keys"]
    assert key["kid"] == issuer.kid and key["alg"] == "ES256" and "d" not in key  # public
    claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["ES256"],
                        audience=satokens.ISSUER,
                        options={"verify_exp": False, "verify_iat": False, "verify_nbf": False})
    assert claims["sub"] == "system:serviceaccount:logs:fluentd"
    assert satokens.openid_configuration()["jwks_uri"] == satokens.ISSUER + "/openid/v1/jwks"
