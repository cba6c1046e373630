"""ServiceAccount tokens, as upstream's API server issues and checks them.

``POST /api/v1/namespaces/NS/serviceaccounts/NAME/token`` (a TokenRequest: ``kubectl
create token NAME``) answers a JWT for the ServiceAccount, signed ES256 with the key of the
file ``sa.key`` (``--service-account-key-file``; made, readable by its owner only, when
missing; every API server of a cluster must be given the same one). Its claims are
upstream's: ``iss`` (``ISSUER``), ``sub`` (``system:serviceaccount:NS:NAME``), ``aud``
(the request's audiences, else the API server's: ``ISSUER``), ``iat``, ``nbf``, ``exp``,
``jti``, and under ``kubernetes.io`` the namespace, the ServiceAccount's name and uid and
the object the token is bound to (``--bound-object-kind Pod|Secret|Node``).

A bearer token that is one of these authenticates as its ServiceAccount (in the groups
``system:serviceaccounts`` and ``system:serviceaccounts:NS``; no role of the token file:
what it may do is what RBAC grants it) while it is signed by the key, unexpired, for one
of the API server's audiences, and its ServiceAccount, and the object it is bound to,
still exist with the uids it names (a pod being deleted for more than a minute: no
longer). Anything else is no user (a 401), as upstream's authenticator answers.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import os
import time
import uuid
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from services import config
from services.apiserver import auth
from services.apiserver import status as st
from shared.api import rbac
from shared.model import meta

Obj = dict[str, Any]

ISSUER = "https://kubernetes.default.svc.cluster.local"
AUDIENCES = (ISSUER,)
DEFAULT_SECONDS = 3600  # kubectl create token's, upstream's TokenRequest default
MIN_SECONDS = 10 * 60
MAX_SECONDS = 1 << 32
DELETED_GRACE = 60.0  # a bound pod being deleted for longer invalidates its tokens
GROUP_VERSION = "authentication.k8s.io/v1"
BOUND = {"Pod": "Pod", "Secret": "Secret", "Node": "Node"}  # the kinds a token binds to
CLAIMS = "kubernetes.io"
VERIFIED = 4096  # tokens whose signatures are kept checked


class SigningKeyError(ValueError):
    """The signing key file cannot be used."""


def load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    """The EC key of the PEM file ``path``, made (P-256, mode 600) when there is none: by
    a link of a whole file into place, so API servers starting at once all take the one
    made first. Acts; raises SigningKeyError."""
    if not path.exists():
        config.private_dir(path.parent)
        key = ec.generate_private_key(ec.SECP256R1())
        part = path.with_name(f".{path.name}.{os.getpid()}")
        config.write_private(part, key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
        try:
            os.link(part, path)
        except FileExistsError:
            pass  # another's is there: take it
        finally:
            part.unlink(missing_ok=True)
    try:
        found = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as err:
        raise SigningKeyError(f"cannot use the service account key {path}: {err}") from err
    if not isinstance(found, ec.EllipticCurvePrivateKey) or \
            not isinstance(found.curve, ec.SECP256R1):
        raise SigningKeyError(f"{path}: want a P-256 EC private key (ES256)")
    return found


def _invalid(problem: str, name: str = "") -> st.ApiError:
    return st.ApiError("Invalid", f'TokenRequest.authentication.k8s.io "{name}" is invalid: '
                       f"{problem}", {"name": name, "group": "authentication.k8s.io",
                                      "kind": "TokenRequest", "causes": [st.cause(problem)]})


def _same_names(body: Obj, namespace: str, name: str) -> None:
    """Invalid (upstream's words) when the request's metadata names another ServiceAccount
    than its path. Decides."""
    md = body.get("metadata") or {}
    given_name, given_ns = (md.get("name"), md.get("namespace")) if isinstance(md, dict) \
        else (None, None)
    if given_name and given_name != name:
        raise _invalid(f'metadata.name: Invalid value: "{given_name}": must match the service '
                       "account name if specified", name)
    if given_ns and given_ns != namespace:
        raise _invalid(f'metadata.namespace: Invalid value: "{given_ns}": must match the '
                       "service account namespace if specified", name)


def _spec(body: Obj) -> tuple[list[str], int, Obj | None]:
    """The audiences, expirationSeconds and boundObjectRef a TokenRequest asks for, its
    defaults filled in; BadRequest or Invalid (upstream's words) otherwise. Decides."""
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise st.bad_request("spec: the spec of a TokenRequest must be an object")
    audiences = spec.get("audiences") or list(AUDIENCES)
    if not isinstance(audiences, list) or not all(isinstance(a, str) and a for a in audiences):
        raise st.bad_request("spec.audiences: must be a list of strings")
    seconds = spec.get("expirationSeconds")
    seconds = DEFAULT_SECONDS if seconds is None else seconds
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise st.bad_request("spec.expirationSeconds: must be an integer")
    if seconds < MIN_SECONDS:
        raise _invalid(f"spec.expirationSeconds: Invalid value: {seconds}: may not specify a "
                       "duration less than 10 minutes")
    if seconds > MAX_SECONDS:
        raise _invalid(f"spec.expirationSeconds: Invalid value: {seconds}: may not specify a "
                       "duration larger than 2^32 seconds")
    ref = spec.get("boundObjectRef")
    if ref is not None and not isinstance(ref, dict):
        raise st.bad_request("spec.boundObjectRef: must be an object")
    return audiences, seconds, ref or None


def _bound(ref: Obj, namespace: str, sa_name: str, objects: rbac.Objects) -> tuple[str, Obj]:
    """The kind and object ``ref`` names, checked as upstream's TokenREST checks it.
    Decides; raises ApiError."""
    api_version, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
    group, _, version = api_version.rpartition("/")
    if group or kind not in BOUND:
        raise st.bad_request(f"cannot bind token to object of type {group}/{version}, "
                             f"Kind={kind}")
    name = str(ref.get("name") or "")
    ns = "" if kind == "Node" else namespace
    obj = objects.get(kind, {}).get(f"{ns}/{name}")
    if obj is None:
        raise st.not_found(kind, name)
    if kind == "Pod" and (obj.get("spec") or {}).get("serviceAccountName") != sa_name:
        raise st.bad_request(f'cannot bind token for serviceaccount "{sa_name}" to pod '
                             "running with different serviceaccount name.")
    uid = str(ref.get("uid") or "")
    if uid and uid != meta.uid(obj):
        raise st.ApiError("Conflict", f'Operation cannot be fulfilled on {kind} "{name}": the '
                          f"UID in the bound object reference ({uid}) does not match the UID "
                          "in record. The object might have been deleted and then recreated",
                          {"name": name, "group": "", "kind": kind})
    return kind, obj


class Issuer:
    """Issues the tokens of ``key`` and authenticates them (a verified token's claims are
    kept, a few thousand at most, so a client's every request is not another signature
    check)."""

    def __init__(self, key: ec.EllipticCurvePrivateKey) -> None:
        self.key = key
        self.public = key.public_key()
        der = self.public.public_bytes(serialization.Encoding.DER,
                                       serialization.PublicFormat.SubjectPublicKeyInfo)
        self.kid = base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()
        self.verified: collections.OrderedDict[str, Obj] = collections.OrderedDict()

    def answer(self, namespace: str, name: str, body: Any, objects: rbac.Objects,
               now: float | None = None) -> Obj:
        """The TokenRequest ``body`` for the ServiceAccount ``namespace/name`` of
        ``objects``, answered: its spec with defaults and its status with the token and
        when it expires. Raises ApiError as upstream answers."""
        now = time.time() if now is None else now
        if not isinstance(body, dict) or body.get("kind", "TokenRequest") != "TokenRequest":
            raise st.bad_request("the body must be a TokenRequest")
        _same_names(body, namespace, name)  # in upstream's order: names, the account, spec
        sa = objects.get("ServiceAccount", {}).get(f"{namespace}/{name}")
        if sa is None:
            raise st.not_found("ServiceAccount", name)
        audiences, seconds, ref = _spec(body)
        private: Obj = {"namespace": namespace,
                        "serviceaccount": {"name": name, "uid": meta.uid(sa)}}
        if ref is not None:
            kind, obj = _bound(ref, namespace, name, objects)
            private[kind.lower()] = {"name": meta.name(obj), "uid": meta.uid(obj)}
            node = str((obj.get("spec") or {}).get("nodeName") or "") if kind == "Pod" else ""
            if node:  # as upstream's, the pod's node too
                node_obj = objects.get("Node", {}).get(f"/{node}")
                private["node"] = {"name": node, **({"uid": meta.uid(node_obj)}
                                                    if node_obj is not None else {})}
        issued = int(now)
        claims = {"aud": audiences, "exp": issued + seconds, "iat": issued, "nbf": issued,
                  "iss": ISSUER, "jti": str(uuid.uuid4()), CLAIMS: private,
                  "sub": rbac.service_account_user(namespace, name)}
        token = jwt.encode(claims, self.key, algorithm="ES256", headers={"kid": self.kid})
        return {"kind": "TokenRequest", "apiVersion": GROUP_VERSION,
                "metadata": {"name": name, "namespace": namespace, "uid": meta.uid(sa),
                             "creationTimestamp": meta.format_time(now)},
                "spec": {"audiences": audiences, "expirationSeconds": seconds,
                         "boundObjectRef": ref},
                "status": {"token": token,
                           "expirationTimestamp": meta.format_time(now + seconds)}}

    def _claims(self, token: str) -> Obj | None:
        """The claims of ``token`` when this key signed it for this issuer; None otherwise
        (its audiences and times are the caller's to check)."""
        found = self.verified.get(token)
        if found is not None:
            self.verified.move_to_end(token)
            return found
        try:
            claims = jwt.decode(token, self.public, algorithms=["ES256"], issuer=ISSUER,
                                options={"verify_aud": False, "verify_exp": False,
                                         "verify_nbf": False, "verify_iat": False,
                                         "require": ["exp", "sub"]})
        except jwt.PyJWTError:
            return None
        if not isinstance(claims.get(CLAIMS), dict):
            return None
        self.verified[token] = claims
        if len(self.verified) > VERIFIED:
            self.verified.popitem(last=False)
        return claims

    def identify(self, token: str, objects: rbac.Objects, now: float | None = None,
                 audiences: tuple[str, ...] | list[str] = AUDIENCES,
                 ) -> tuple[Obj, list[str]] | None:
        """Who ``token`` is, as a TokenReview's ``userInfo`` (its ServiceAccount's name,
        uid and groups, and as upstream's extras the object it is bound to and its id),
        and which of ``audiences`` it is for; None when it is no one (see the module's
        docstring)."""
        claims = self._claims(token) if token.count(".") == 2 else None
        if claims is None:
            return None
        aud = claims.get("aud")
        aud = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        held = [a for a in audiences if a in aud]
        now = time.time() if now is None else now
        exp, nbf = claims.get("exp"), claims.get("nbf", 0)
        if not held or not isinstance(exp, int) or not isinstance(nbf, int) or exp <= now \
                or nbf > now + DELETED_GRACE:
            return None
        private = claims[CLAIMS]
        ns = str(private.get("namespace") or "")
        sa_ref = private.get("serviceaccount") or {}
        if not isinstance(sa_ref, dict) or not _holds(objects, "ServiceAccount", ns, sa_ref,
                                                      now):
            return None
        extra: dict[str, list[str]] = {}
        for kind in BOUND:
            ref = private.get(kind.lower())
            if ref is None:
                continue
            if not isinstance(ref, dict):
                return None
            if kind != "Node" or "pod" not in private:  # a pod's node is named, not bound
                if not _holds(objects, kind, "" if kind == "Node" else ns, ref, now):
                    return None
            if kind != "Secret":
                for field in ("name", "uid"):
                    if ref.get(field):
                        extra[f"authentication.kubernetes.io/{kind.lower()}-{field}"] = \
                            [str(ref[field])]
        user = str(claims.get("sub") or "")
        if user != rbac.service_account_user(ns, str(sa_ref.get("name") or "")):
            return None
        if claims.get("jti"):
            extra["authentication.kubernetes.io/credential-id"] = [f"JTI={claims['jti']}"]
        return {"username": user, "uid": str(sa_ref.get("uid") or ""),
                "groups": list(rbac.groups_of(user)), "extra": extra}, held

    def authenticate(self, header: str | None, objects: rbac.Objects,
                     now: float | None = None) -> auth.User | None:
        """The ServiceAccount user of an ``Authorization: Bearer <token>`` header whose
        token this issuer made for the API server and that still holds; None
        otherwise."""
        if not header or not header.startswith("Bearer "):
            return None
        found = self.identify(header[len("Bearer "):].strip(), objects, now)
        if found is None:
            return None
        info = found[0]
        return auth.User(info["username"], auth.NO_ROLE, tuple(info["groups"]))


OPENID_CONFIGURATION = "/.well-known/openid-configuration"
JWKS = "/openid/v1/jwks"


def openid_configuration() -> Obj:
    """The issuer's OpenID discovery document, as upstream serves it: where its keys are,
    so that a system outside the cluster checks its tokens itself (a cloud's workload
    identity, Vault's JWT auth)."""
    return {"issuer": ISSUER, "jwks_uri": ISSUER + JWKS,
            "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"]}


def jwks(issuer: Issuer) -> Obj:
    """The public keys that check the tokens (a JSON Web Key Set of the one key)."""
    key = jwt.algorithms.ECAlgorithm.to_jwk(issuer.public, as_dict=True)
    return {"keys": [{**key, "kid": issuer.kid, "use": "sig", "alg": "ES256"}]}


def _holds(objects: rbac.Objects, kind: str, namespace: str, ref: Obj, now: float) -> bool:
    """Whether the object a token names still is: there, with its uid, and not being
    deleted for longer than ``DELETED_GRACE``."""
    obj = objects.get(kind, {}).get(f"{namespace}/{ref.get('name') or ''}")
    if obj is None or meta.uid(obj) != ref.get("uid"):
        return False
    since = meta.parse_time((obj.get("metadata") or {}).get("deletionTimestamp"))
    return since is None or since > now - DELETED_GRACE
