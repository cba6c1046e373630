"""The fleet view (/ui) in a real headless Chromium against a live stack with an API server:
the page and its bundle served without a token and the data only with one, the grid's cells
after an apply, a rollout's cells turning over live (from the watch, no polling), a view
token with no action buttons (and the server refusing its write anyway), an admin's
confirmed pause and cordon landing in the log under the admin's name, and `why` linked to a
log entry."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from services.replay import scan
from shared.daemonset import placement
from shared.model import meta, rolloutopts
from shared.store import adapters
from shared.store.eventlog import RedisEventLog
from shared.store.server import RedisServer
from tests.integration import apiserver_kit, browser_kit
from tests.integration.apiserver_kit import ApiServer
from tests.integration.controller_kit import daemonset, owned_pods
from tests.integration.stack import wait_for

NODES = 4
DS = "fleet-agent"
NS = "default"
DEADLINE_MS = 60_000
FAILING = "fail.example/*"  # the node agent fails pods of these images
CRASHING = "crash.example/*"  # its containers of these images wait in CrashLoopBackOff


@pytest.fixture(scope="module")
def api(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[ApiServer]:
    with apiserver_kit.running(redis_server.url, "fleetui", tmp_path_factory.mktemp("fleetui"),
                               nodes=NODES, agent_args=("--fail-image", FAILING,
                                                       "--crash-image", CRASHING)) as server:
        nodes = sorted(meta.name(n) for n in server.stack.store.list("Node"))
        for i, name in enumerate(nodes):
            server.kubectl("label", "node", name, f"topology.kubernetes.io/zone=zone-{i % 2}")
        yield server


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser_kit.browser() as context:
        yield context


@pytest.fixture(scope="module")
def applied(api: ApiServer) -> str:
    """The DaemonSet applied with kubectl, its pods all available."""
    api.kubectl("apply", "-f", "-", input=json.dumps(daemonset(DS, NS)))
    wait_for(lambda: api.stack.status(f"{NS}/{DS}").get("numberAvailable") == NODES,
             timeout=60, what="every pod available")
    return f"{NS}/{DS}"


@contextmanager
def _open(chromium: Any, api: ApiServer, user: str) -> Iterator[Any]:
    """The page signed in as ``user``, live; any uncaught error in it fails the test."""
    page = chromium.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    try:
        page.goto(f"{api.url}/ui#token={api.tokens[user]}")
        page.wait_for_selector('[data-live="yes"]', timeout=DEADLINE_MS)
        yield page
    finally:
        page.close()
    assert errors == []


@contextmanager
def _another(api: ApiServer, manifest: dict[str, Any]) -> Iterator[None]:
    """A DaemonSet of the test's own beside the shared one, deleted after."""
    api.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    try:
        yield
    finally:
        api.kubectl("delete", "ds", meta.name(manifest), "-n", NS)


def _cells(page: Any, state: str | None = None) -> int:
    sel = f'.cell.state[data-ds="{DS}"]' + (f'[data-state="{state}"]' if state else "")
    return int(page.locator(sel).count())


def _wait_cells(page: Any, state: str, n: int) -> None:
    page.wait_for_function(
        "([ds, state, n]) => document.querySelectorAll("
        "`.cell.state[data-ds=\"${ds}\"][data-state=\"${state}\"]`).length === n",
        arg=[DS, state, n], timeout=DEADLINE_MS)


def test_page_is_static_and_every_answer_needs_a_token(api: ApiServer) -> None:
    code, body = api.request("GET", "/ui", token=None)
    assert code == 200 and '<div id="root">' in body and "fleet.js" in body
    code, body = api.request("GET", "/ui/static/fleet.js", token=None)
    assert code == 200 and len(body) > 10_000
    assert api.request("GET", "/ui/static/..%2Fapp.py", token=None)[0] == 404
    assert api.request("GET", "/ui/api/why?kind=daemonset&namespace=default&name=x",
                       token=None)[0] == 401
    assert api.request("GET", "/ui/api/log/1-0", token="bogus-token-0123456789")[0] == 401
    code, doc = api.request("GET", "/ui/api/why?kind=pod&namespace=Bad_NS&name=x",
                            token="viewer")
    assert code == 400 and doc["reason"] == "BadRequest"


def test_an_answer_shows_only_what_the_user_may_read_through_the_api(
        api: ApiServer, applied: str) -> None:
    """A fleet answer is the API's read of what it shows: a log entry of a Secret is no
    viewer's (as ``kubectl get secret`` is not), and a ServiceAccount that nothing grants
    reads nothing of a DaemonSet, its placement, history or log."""
    api.kubectl("create", "secret", "generic", "fleet-s", "--from-literal=k=v")
    entry = api.json("get", "secret", "fleet-s")["metadata"]["resourceVersion"]
    assert api.request("GET", f"/ui/api/log/{entry}")[1]["kind"] == "Secret"  # an admin
    code, doc = api.request("GET", f"/ui/api/log/{entry}", token="viewer")
    assert code == 403 and doc["message"] == (
        'secrets "fleet-s" is forbidden: User "viewer" cannot get resource "secrets" in API '
        'group "" in the namespace "default"'), doc
    ds_entry = api.json("get", "ds", DS)["metadata"]["resourceVersion"]
    assert api.request("GET", f"/ui/api/log/{ds_entry}", token="viewer")[0] == 200
    api.kubectl("create", "serviceaccount", "nobody")
    token = api.kubectl("create", "token", "nobody").stdout.strip()
    for path in (f"/ui/api/why?kind=daemonset&namespace={NS}&name={DS}",
                 f"/ui/api/placement?namespace={NS}&name={DS}",
                 f"/ui/api/history?namespace={NS}&name={DS}",
                 f"/ui/api/progress?namespace={NS}&name={DS}", f"/ui/api/log/{ds_entry}"):
        code, doc = api.request("GET", path, token=token)
        assert code == 403 and "system:serviceaccount:default:nobody" in doc["message"], path
        assert api.request("GET", path, token="viewer")[0] == 200, path


def test_grid_shows_a_cell_per_node_after_an_apply(api: ApiServer, chromium: Any,
                                                   applied: str) -> None:
    with _open(chromium, api, "viewer") as page:
        _wait_cells(page, "new-available", NODES)
        assert _cells(page) == NODES
        # grouped by zone: one header row per zone, with its counts
        groups = page.locator(".group-row")
        assert groups.count() == 2
        assert "zone-0" in groups.nth(0).inner_text()
        label = groups.nth(0).locator(".agg").first.get_attribute("aria-label")
        assert label is not None and "2 of 2 updated, 2 available" in label
        # a node label selector narrows the rows, through the API's own labelSelector
        page.fill("#selector", "topology.kubernetes.io/zone=zone-1")
        page.click("form.filters button[type=submit]")
        page.wait_for_function("() => document.querySelectorAll('.group-row').length === 1",
                               timeout=DEADLINE_MS)
        _wait_cells(page, "new-available", NODES // 2)
        # a namespace narrows the DaemonSets (columns) through the namespaced watches
        page.fill("#namespace", "kube-system")
        page.click("form.filters button[type=submit]")
        page.wait_for_function("() => document.querySelectorAll('.colhead').length === 0"
                               " && document.querySelectorAll('.node-name').length === 2",
                               timeout=DEADLINE_MS)
        assert "namespace=kube-system" in page.url
        page.fill("#namespace", NS)
        page.click("form.filters button[type=submit]")
        _wait_cells(page, "new-available", NODES // 2)


def test_a_rollout_turns_the_cells_over_live_from_the_watch(api: ApiServer, chromium: Any,
                                                            applied: str) -> None:
    with _open(chromium, api, "viewer") as page:
        _wait_cells(page, "new-available", NODES)
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        before = {meta.name(p): meta.labels(p)["controller-revision-hash"]
                  for p in owned_pods(api.stack.store, applied)}
        # a partitioned rollout holds half the nodes at the old revision: the page shows
        # both, then, once promoted, every cell turned over, all from the open watches
        api.kubectl("annotate", f"ds/{DS}", "-n", NS, f"{rolloutopts.PARTITION}={NODES // 2}")
        api.kubectl("set", "image", f"ds/{DS}", "-n", NS, "main=registry.k8s.io/pause:3.10")
        _wait_cells(page, "old-available", NODES // 2)
        _wait_cells(page, "new-available", NODES // 2)
        api.kubectl("annotate", f"ds/{DS}", "-n", NS, f"{rolloutopts.PARTITION}-")
        _wait_cells(page, "new-available", NODES)
        after = {meta.labels(p)["controller-revision-hash"]
                 for p in owned_pods(api.stack.store, applied)}
        assert len(after) == 1 and after.isdisjoint(before.values())
        # live from the open watches: no list of pods was read again
        pod_lists = [u for u in requests if re.search(r"/pods(\?|$)", u) and "watch=" not in u]
        assert pod_lists == []


def test_a_view_token_sees_no_action_buttons_and_its_write_is_refused(
        api: ApiServer, chromium: Any, applied: str) -> None:
    with _open(chromium, api, "viewer") as page:
        for open_panel in (lambda: page.click(f'.colhead button:text-is("{DS}")'),
                           lambda: page.locator(".node-name").first.click()):
            # the panel asks the server whether the user may write; once it answered no,
            # there are no buttons
            with page.expect_response(lambda r: "selfsubjectaccessreviews" in r.url,
                                      timeout=DEADLINE_MS) as answer:
                open_panel()
            assert answer.value.json()["status"]["allowed"] is False
            page.wait_for_selector("aside.panel h2", timeout=DEADLINE_MS)
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => r()))")
            assert page.locator("button.action").count() == 0
    # the plan is readable by any role, the write it describes is not the viewer's to make
    code, plan = api.request("GET", f"/ui/api/action?action=pause&namespace={NS}&name={DS}",
                             token="viewer")
    assert code == 200 and plan["method"] == "PATCH"
    code, doc = api.request("PATCH", plan["path"], plan["body"], token="viewer",
                            headers={"Content-Type": plan["contentType"]})
    assert code == 403 and doc["reason"] == "Forbidden"
    assert rolloutopts.PAUSED not in meta.annotations(api.stack.store.get("DaemonSet",
                                                                          applied))


def _writer_of_pause(api: ApiServer, key: str) -> str:
    """Who wrote the first entry of the DaemonSet with the paused annotation (the log)."""
    first = ""
    log = adapters.on(api.stack.store, RedisEventLog)
    for hit in scan.backwards_in(log, lambda e: e.kind == "DaemonSet" and e.key == key
                                 and e.type != "DECISION"):
        if rolloutopts.PAUSED not in meta.annotations(hit.obj):
            break
        first = hit.user
    return first


def _confirm(page: Any, label: str) -> None:
    page.click(f'button.action:text-is("{label}")')
    dialog = page.locator("dialog[open]")
    dialog.wait_for(timeout=DEADLINE_MS)
    assert label in dialog.locator("h3").inner_text()
    dialog.locator("button.danger").click()
    page.wait_for_function("(label) => new RegExp(`^done: (rollout )?${label} `)"
                           ".test(document.querySelector('.toast').textContent)",
                           arg=label, timeout=DEADLINE_MS)


def test_an_admin_pauses_a_rollout_and_cordons_a_node_each_confirmed(
        api: ApiServer, chromium: Any, applied: str) -> None:
    with _open(chromium, api, "admin") as page:
        page.click(f'.colhead button:text-is("{DS}")')
        page.locator('button.action:text-is("pause")').wait_for(timeout=DEADLINE_MS)
        # cancelled: nothing written
        page.click('button.action:text-is("pause")')
        page.locator("dialog[open] button[value=cancel]").click()
        assert rolloutopts.PAUSED not in meta.annotations(
            api.stack.store.get("DaemonSet", applied))
        _confirm(page, "pause")
        wait_for(lambda: meta.annotations(api.stack.store.get("DaemonSet", applied))
                 .get(rolloutopts.PAUSED) == "true", what="the paused annotation")
        assert _writer_of_pause(api, applied) == "admin"
        page.wait_for_selector("text=paused=true", timeout=DEADLINE_MS)  # the panel, live
        _confirm(page, "resume")
        wait_for(lambda: rolloutopts.PAUSED not in meta.annotations(
            api.stack.store.get("DaemonSet", applied)), what="the annotation removed")

        node = page.locator(".node-name").first.inner_text().strip()
        page.locator(".node-name").first.click()
        page.locator('button.action:text-is("cordon")').wait_for(timeout=DEADLINE_MS)
        _confirm(page, "cordon")
        wait_for(lambda: (api.stack.store.get("Node", "/" + node).get("spec") or {})
                 .get("unschedulable") is True, what="the node cordoned")
        page.wait_for_selector(".node-name .tag", timeout=DEADLINE_MS)  # the grid, live
        _confirm(page, "uncordon")
        wait_for(lambda: not (api.stack.store.get("Node", "/" + node).get("spec") or {})
                 .get("unschedulable"), what="the node uncordoned")


def test_a_cell_answers_why_with_links_to_the_log(api: ApiServer, chromium: Any,
                                                  applied: str) -> None:
    with _open(chromium, api, "viewer") as page:
        _wait_cells(page, "new-available", NODES)
        page.locator(f'.cell.state[data-ds="{DS}"]').first.click()
        page.wait_for_selector(".why-lines", timeout=DEADLINE_MS)
        text = page.locator(".why-lines").inner_text()
        assert text.startswith("pod default/") and "created: entry" in text
        link = page.locator(".entry-link").first
        entry = link.inner_text()
        link.click()
        shown = page.locator("section.entry")
        shown.locator("pre").wait_for(timeout=DEADLINE_MS)  # the entry has loaded
        assert entry in shown.locator("h4").inner_text()
        text = shown.inner_text()
        assert "Pod" in text or "DECISION" in text


def test_the_grid_is_driven_by_the_keyboard(api: ApiServer, chromium: Any,
                                            applied: str) -> None:
    with _open(chromium, api, "viewer") as page:
        _wait_cells(page, "new-available", NODES)
        active = "() => [document.activeElement.dataset.r, document.activeElement.dataset.c]"
        page.locator('[data-r="0"][data-c="0"]').focus()
        assert page.locator('[role="grid"]').get_attribute("aria-rowcount") == str(NODES + 3)
        group = page.locator(".group-row").first
        assert group.get_attribute("aria-expanded") == "true"
        page.keyboard.press("Enter")  # a group's header folds it
        page.wait_for_function("() => document.querySelector('.group-row')"
                               ".getAttribute('aria-expanded') === 'false'", timeout=DEADLINE_MS)
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.querySelector('.group-row')"
                               ".getAttribute('aria-expanded') === 'true'", timeout=DEADLINE_MS)
        page.locator('[data-r="0"][data-c="0"]').focus()
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"() => ({active})().join() === '1,1'", timeout=DEADLINE_MS)
        cell = page.evaluate("() => document.activeElement.getAttribute('aria-label')")
        assert cell.endswith(f"{DS}: new revision, available")
        page.keyboard.press("Enter")
        heading = page.locator("aside.panel h2")
        heading.wait_for(timeout=DEADLINE_MS)
        assert heading.inner_text() == f"{NS}/{DS} on {cell.split(',')[0]}"
        page.locator('[data-r="1"][data-c="1"]').focus()
        page.keyboard.press("End")
        page.keyboard.press("Home")
        page.wait_for_function(f"() => ({active})().join() === '1,0'", timeout=DEADLINE_MS)


def test_an_admin_undoes_a_rollout_to_the_previous_revision(api: ApiServer, chromium: Any,
                                                           applied: str) -> None:
    def image() -> str:
        ds = api.stack.store.get("DaemonSet", applied)
        return str(ds["spec"]["template"]["spec"]["containers"][0]["image"])

    before = image()
    api.kubectl("set", "image", f"ds/{DS}", "-n", NS, "main=registry.k8s.io/pause:3.8")
    with _open(chromium, api, "admin") as page:
        page.click(f'.colhead button:text-is("{DS}")')
        page.wait_for_function("() => [...document.querySelectorAll('ol.history summary')]"
                               ".some(s => s.textContent.includes('current') &&"
                               " s.textContent.startsWith('revision'))", timeout=DEADLINE_MS)
        page.locator("ol.history li").last.locator("summary").click()
        assert "pause:3.8" in page.locator("ol.history li").last.locator(".diff").inner_text()
        _confirm(page, "undo")
        wait_for(lambda: image() == before, what="the template rolled back")


def test_an_action_plan_survives_status_and_annotation_writes_but_not_a_spec_change(
        api: ApiServer, applied: str) -> None:
    def plan(action: str) -> dict[str, Any]:
        code, doc = api.request("GET", f"/ui/api/action?action={action}&namespace={NS}"
                                f"&name={DS}", token="editor")
        assert code == 200, doc
        return dict(doc)

    def send(p: dict[str, Any]) -> tuple[int, Any]:
        return api.request("PATCH", p["path"], p["body"], token="editor",
                           headers={"Content-Type": p["contentType"]})

    pause = plan("pause")
    assert pause["body"][0] == {"op": "test", "path": "/metadata/generation",
                                "value": meta.metadata(api.stack.store.get(
                                    "DaemonSet", applied))["generation"]}
    api.kubectl("annotate", f"ds/{DS}", "-n", NS, "fleet-test=1", "--overwrite")
    code, doc = send(pause)
    assert code == 200, doc
    assert meta.annotations(doc)[rolloutopts.PAUSED] == "true"
    resume = plan("resume")
    api.kubectl("set", "image", f"ds/{DS}", "-n", NS, "main=registry.k8s.io/pause:3.7")
    code, doc = send(resume)
    assert code >= 400 and doc["kind"] == "Status"
    assert meta.annotations(api.stack.store.get("DaemonSet", applied))[rolloutopts.PAUSED] \
        == "true"
    assert send(plan("resume"))[0] == 200
    assert plan("resume")["noop"] is True
    code, doc = api.request("GET", "/ui/api/action?action=reboot&node=x", token="editor")
    assert code == 400 and "supported values" in doc["message"]


def test_failed_pods_and_nodes_a_daemonset_does_not_select_read_as_such(
        api: ApiServer, chromium: Any, applied: str) -> None:
    name = "fleet-failing"
    manifest = daemonset(name, NS, image="fail.example/agent:1",
                         node_selector={"topology.kubernetes.io/zone": "zone-0"})
    with _another(api, manifest), _open(chromium, api, "viewer") as page:
        cells = f'.cell.state[data-ds="{name}"]'
        page.wait_for_function(
            "(sel) => document.querySelectorAll(sel + '[data-state=\"none\"]').length === 2"
            " && document.querySelectorAll(sel + '[data-state=\"failed\"]').length > 0",
            arg=cells, timeout=DEADLINE_MS)
        label = page.locator(f'{cells}[data-state="none"]').first.get_attribute("aria-label")
        reason = placement.REASON_NODE_SELECTOR
        assert label is not None and f"{name}: not scheduled here ({reason})" in label
        page.locator(f'{cells}[data-state="none"]').first.click()
        page.wait_for_selector(".why-lines", timeout=DEADLINE_MS)
        assert placement.REASON_NODE_SELECTOR in page.locator(".why-lines").inner_text()


def test_crash_looping_pods_read_as_such(api: ApiServer, chromium: Any, applied: str) -> None:
    name = "fleet-crashing"
    with _another(api, daemonset(name, NS, image="crash.example/agent:1")), \
            _open(chromium, api, "viewer") as page:
        cells = f'.cell.state[data-ds="{name}"]'
        page.wait_for_function(
            "([sel, n]) => document.querySelectorAll(sel + '[data-state=\"crashloop\"]')"
            ".length === n", arg=[cells, NODES], timeout=DEADLINE_MS)
        crashing = page.locator(f'{cells}[data-state="crashloop"]')
        assert {c.inner_text().strip() for c in crashing.all()} == {"C"}
        label = crashing.first.get_attribute("aria-label")
        assert label is not None and label.endswith(f"{name}: crash-looping")
        # the pods are what the grid says: running, their containers in CrashLoopBackOff
        pods = owned_pods(api.stack.store, f"{NS}/{name}")
        assert len(pods) == NODES
        for pod in pods:
            states = [c["state"] for c in pod["status"]["containerStatuses"]]
            assert pod["status"]["phase"] == "Running"
            assert all(s["waiting"]["reason"] == "CrashLoopBackOff" for s in states)
        # their group rows count them as bad
        agg = page.locator(f'.group-row .agg[aria-label^="{name}:"]').first
        assert "2 failed or crash-looping" in (agg.get_attribute("aria-label") or "")


def test_the_progress_chart_starts_from_the_log(api: ApiServer, chromium: Any,
                                                applied: str) -> None:
    path = f"/ui/api/progress?namespace={NS}&name={DS}"
    assert api.request("GET", path, token=None)[0] == 401
    assert api.request("GET", "/ui/api/progress?namespace=default&name=Bad_",
                       token="viewer")[0] == 400
    code, doc = api.request("GET", path, token="viewer")
    ds = api.stack.store.get("DaemonSet", applied)
    assert code == 200 and doc["uid"] == meta.uid(ds)
    times = [p[0] for p in doc["points"]]
    assert times == sorted(times) and len(times) >= 2
    assert doc["points"][0][1:] != [NODES, NODES, NODES]  # from before every pod was up
    assert [NODES, NODES, NODES] in [p[1:] for p in doc["points"]]
    opened = time.time()
    with _open(chromium, api, "viewer") as page:
        page.click(f'.colhead button:text-is("{DS}")')
        # the chart has points from before the page opened (the log's), then the live ones
        page.wait_for_function(
            "(opened) => { const c = document.querySelector('aside.panel .chart');"
            " return c && c.dataset.since !== '' && Number(c.dataset.since) < opened"
            " && Number(c.dataset.points) >= 2; }", arg=opened, timeout=DEADLINE_MS)
        since = float(page.locator("aside.panel .chart").get_attribute("data-since") or 0)
        assert since == times[0]


CONTRAST_JS = """() => {
  const rgb = (s) => (s.match(/[0-9.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const out = {};
  for (const el of document.querySelectorAll('.legend .swatch, .cell.state, .group-row, .head .cell')) {
    const st = getComputedStyle(el);
    const bg = rgb(st.backgroundColor);
    if (bg.length === 4 && bg[3] === 0) continue;  // transparent: the page's white below
    const [a, b] = [lum(rgb(st.color)), lum(bg)].sort((x, y) => y - x);
    out[el.className] = Math.round(((a + 0.05) / (b + 0.05)) * 100) / 100;
  }
  return out;
}"""


def test_every_state_reads_with_aa_contrast_and_a_label(api: ApiServer, chromium: Any,
                                                        applied: str) -> None:
    with _open(chromium, api, "viewer") as page:
        _wait_cells(page, "new-available", NODES)
        ratios = page.evaluate(CONTRAST_JS)
        assert len([k for k in ratios if "swatch" in k]) >= 7
        assert {k: v for k, v in ratios.items() if v < 4.5} == {}
        # the state is in words too (not colour alone), for screen readers and tooltips
        for cell in page.locator(".cell.state").all():
            assert (cell.get_attribute("aria-label") or "").count(":") == 1
        # the DaemonSet's panel: the progress chart is drawn, the events are listed
        page.click(f'.colhead button:text-is("{DS}")')
        page.wait_for_selector("aside.panel .chart canvas", timeout=DEADLINE_MS)
        page.wait_for_selector("table.events td:text-is('SuccessfulCreate')",
                               timeout=DEADLINE_MS)
