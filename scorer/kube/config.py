"""How to reach a kube-apiserver: a kubeconfig file, or the in-cluster service account.

``load_kubeconfig(path, context=None)`` reads a kubeconfig (the current
context, or ``context``) as kubectl does for what a scheduler needs: the
server, the CA (``certificate-authority`` file or ``-data``) or
``insecure-skip-tls-verify``, and the user's bearer ``token`` or
``tokenFile``, client certificate and key (files or ``-data``). A user that
authenticates through an ``exec`` or ``auth-provider`` plugin is refused
with a message saying so: scorer runs no credential plugins.

``in_cluster()`` is the pod's service account: ``KUBERNETES_SERVICE_HOST``
and ``_PORT``, the CA and the token under
``/var/run/secrets/kubernetes.io/serviceaccount``. The token is re-read when
its file changes, since the kubelet rotates projected tokens (about hourly).

Every problem is a ``KubeConfigError`` naming the file and the field path.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import attrs

from scorer.errors import InputError
from scorer.inputs.describe import expected, join_path, quote
from scorer.inputs.reader import CONFIG_LIMITS, read_documents, single_document

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Fields of a kubeconfig user that scorer implements; the rest of a user is ignored as kubectl would
# (impersonation and username/password are not used by schedulers).
_PLUGIN_FIELDS = ("exec", "auth-provider")


class KubeConfigError(InputError):
    """A kubeconfig or in-cluster configuration that cannot be used."""


@attrs.frozen(slots=True)
class ClusterAccess:
    """One API server and the credentials to use with it.

    ``ca_file`` / ``client_cert_file`` / ``client_key_file`` are paths (inline
    ``-data`` is written to private temporary files, as ``ssl`` reads files);
    ``token`` is fixed, ``token_file`` is read again whenever it changes.
    """

    server: str
    source: str
    ca_file: str | None = None
    insecure_skip_tls_verify: bool = False
    token: str | None = None
    token_file: str | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None
    _token_cache: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS settings for ``server`` (None for plain http)."""
        if urlparse(self.server).scheme != "https":
            return None
        if self.insecure_skip_tls_verify:
            # Nothing is verified: no CA store to load (loading the system's takes ~0.1 s per context).
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context = ssl.create_default_context(cafile=self.ca_file)
        if self.client_cert_file and self.client_key_file:
            context.load_cert_chain(self.client_cert_file, self.client_key_file)
        return context

    def bearer_token(self) -> str | None:
        """The token to send: ``token``, or ``token_file``'s content, re-read when the file changes."""
        if self.token is not None or self.token_file is None:
            return self.token
        try:
            stat = os.stat(self.token_file)
        except OSError as error:
            raise KubeConfigError(f"{self.source}: token file {quote(self.token_file)}: "
                                  f"{error.strerror or error}") from None
        key = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if self._token_cache.get("key") != key:
            try:
                self._token_cache["token"] = Path(self.token_file).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as error:
                raise KubeConfigError(f"{self.source}: token file {quote(self.token_file)}: {error}") from None
            self._token_cache["key"] = key
        return str(self._token_cache["token"])

    def headers(self) -> dict[str, str]:
        token = self.bearer_token()
        return {"Authorization": f"Bearer {token}"} if token else {}


@attrs.frozen(slots=True)
class AccessChoice:
    """Where the API access comes from: a kubeconfig file and context, or (``kubeconfig`` None) the
    in-cluster service account."""

    kubeconfig: str | None
    context: str | None = None

    def load(self) -> ClusterAccess:
        return in_cluster() if self.kubeconfig is None else load_kubeconfig(self.kubeconfig, self.context)


def choose_access(kubeconfig: str | None, context: str | None = None,
                  environ: Mapping[str, str] | None = None) -> AccessChoice:
    """The access ``scorer run`` uses: ``kubeconfig`` (``--kubeconfig``, else ``clientConnection.kubeconfig``),
    else the in-cluster service account (``KUBERNETES_SERVICE_HOST`` set), else ``$KUBECONFIG`` or
    ``~/.kube/config`` when that file exists."""
    if kubeconfig:
        return AccessChoice(kubeconfig, context)
    if (os.environ if environ is None else environ).get("KUBERNETES_SERVICE_HOST"):
        return AccessChoice(None)
    default = default_kubeconfig_path()
    if Path(default).is_file():
        return AccessChoice(default, context)
    raise KubeConfigError("no cluster to talk to: give --kubeconfig FILE (or clientConnection.kubeconfig in the "
                          f"configuration), run scorer in a pod, or create {default}")


def default_kubeconfig_path() -> str:
    """``$KUBECONFIG`` (its first file, if it lists several), else ``~/.kube/config``."""
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return listed[0] if listed else str(Path.home() / ".kube" / "config")


def load_kubeconfig(path: str | os.PathLike[str], context: str | None = None) -> ClusterAccess:
    """The cluster and user of ``context`` (default: ``current-context``) in the kubeconfig at ``path``."""
    source = os.fspath(path)
    document = single_document(read_documents(source, limits=CONFIG_LIMITS), source)
    data = document.data if document is not None else None
    if not isinstance(data, Mapping):
        raise KubeConfigError(f"{source}: {expected('a kubeconfig (an object with clusters, users, contexts)', data)}")
    reader = _Reader(source, Path(source).resolve().parent)
    name = context if context is not None else reader.string(data, "current-context", "")
    if not name:
        raise KubeConfigError(f"{source}: current-context: no current context; name one with --context")
    ctx = reader.named(data, "contexts", name, "context")
    cluster_name = reader.string(ctx, "cluster", f"contexts[{quote(name)}].context", required=True)
    user_name = reader.string(ctx, "user", f"contexts[{quote(name)}].context")
    cluster = reader.named(data, "clusters", cluster_name, "cluster")
    user = reader.named(data, "users", user_name, "user") if user_name else {}
    return reader.access(cluster_name, cluster, user_name, user)


def in_cluster(environ: Mapping[str, str] | None = None,
               account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR) -> ClusterAccess:
    """The service account of the pod scorer runs in."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeConfigError("in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                              "are not set (not running in a pod?); give --kubeconfig")
    directory = Path(account_dir)
    token, ca = directory / "token", directory / "ca.crt"
    for path in (token, ca):
        if not path.is_file():
            raise KubeConfigError(f"in-cluster configuration: {path} does not exist (is the service account "
                                  "token mounted?)")
    server_host = f"[{host}]" if ":" in host else host
    return ClusterAccess(server=f"https://{server_host}:{port}", source="in-cluster configuration",
                         ca_file=str(ca), token_file=str(token))


class _Reader:
    """Field access with paths for one kubeconfig."""

    def __init__(self, source: str, base: Path) -> None:
        self.source = source
        self.base = base  # relative file paths in a kubeconfig are relative to the file

    def fail(self, path: str, message: str) -> KubeConfigError:
        return KubeConfigError(f"{self.source}: {path}: {message}")

    def string(self, obj: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> str:
        value = obj.get(key)
        if value is None or value == "":
            if required:
                raise self.fail(join_path(path, key), "Required value")
            return ""
        if not isinstance(value, str):
            raise self.fail(join_path(path, key), expected("a string", value))
        return value

    def named(self, data: Mapping[str, Any], section: str, name: str, field: str) -> Mapping[str, Any]:
        """``data[section]``'s entry ``name`` (a list of ``{name, <field>: {...}}``), its ``field`` object."""
        entries = data.get(section) or []
        if not isinstance(entries, list):
            raise self.fail(section, expected("a list", entries))
        for i, entry in enumerate(entries):
            if isinstance(entry, Mapping) and entry.get("name") == name:
                inner = entry.get(field) or {}
                if not isinstance(inner, Mapping):
                    raise self.fail(f"{section}[{i}].{field}", expected("an object", inner))
                return inner
        known = [e.get("name") for e in entries if isinstance(e, Mapping)]
        raise self.fail(section, f"no entry named {quote(name)} (there are: "
                                 f"{', '.join(quote(k) for k in known) or 'none'})")

    def file_or_data(self, obj: Mapping[str, Any], key: str, path: str, suffix: str) -> str | None:
        """The path of ``key``, or of a private file holding ``key-data`` (base64 PEM)."""
        file = self.string(obj, key, path)
        inline = self.string(obj, f"{key}-data", path)
        if file and inline:
            raise self.fail(join_path(path, f"{key}-data"), f"give either {key} or {key}-data, not both")
        if file:
            resolved = Path(file) if Path(file).is_absolute() else self.base / file
            if not resolved.is_file():
                raise self.fail(join_path(path, key), f"file {quote(str(resolved))} does not exist")
            return str(resolved)
        if inline:
            try:
                content = base64.b64decode(inline, validate=True)
            except (binascii.Error, ValueError):
                raise self.fail(join_path(path, f"{key}-data"), "is not valid base64") from None
            handle, name = tempfile.mkstemp(prefix="scorer-kube-", suffix=suffix)  # mode 0600
            with os.fdopen(handle, "wb") as out:
                out.write(content)
            return name
        return None

    def access(self, cluster_name: str, cluster: Mapping[str, Any], user_name: str,
               user: Mapping[str, Any]) -> ClusterAccess:
        cpath, upath = f"clusters[{quote(cluster_name)}].cluster", f"users[{quote(user_name)}].user"
        server = self.string(cluster, "server", cpath, required=True)
        parsed = urlparse(server)
        if parsed.scheme not in ("https", "http") or not parsed.netloc:
            raise self.fail(join_path(cpath, "server"), f"{quote(server)} is not an http(s) URL")
        insecure = cluster.get("insecure-skip-tls-verify", False)
        if not isinstance(insecure, bool):
            raise self.fail(join_path(cpath, "insecure-skip-tls-verify"), expected("a boolean", insecure))
        for plugin in _PLUGIN_FIELDS:
            if user.get(plugin):
                raise self.fail(join_path(upath, plugin), f"credential plugins ({plugin}) are not supported by "
                                "scorer: use a token, a token file or a client certificate (for example a "
                                "service account token)")
        token = self.string(user, "token", upath) or None
        token_file = self.string(user, "tokenFile", upath) or None
        if token and token_file:
            raise self.fail(join_path(upath, "tokenFile"), "give either token or tokenFile, not both")
        if token_file and not Path(token_file).is_absolute():
            token_file = str(self.base / token_file)
        cert = self.file_or_data(user, "client-certificate", upath, ".crt")
        key = self.file_or_data(user, "client-key", upath, ".key")
        if bool(cert) != bool(key):
            raise self.fail(upath, "client-certificate and client-key go together: give both or neither")
        return ClusterAccess(
            server=server.rstrip("/"), source=self.source,
            ca_file=self.file_or_data(cluster, "certificate-authority", cpath, ".crt"),
            insecure_skip_tls_verify=insecure, token=token, token_file=token_file,
            client_cert_file=cert, client_key_file=key)
