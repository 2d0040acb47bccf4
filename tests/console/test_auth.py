"""The console's sign-in, CSRF and escaping, attacked over real HTTP against a live server and PostgreSQL."""

from __future__ import annotations

from anthares44.automation.errors import A44Error
from tests.runtime.engine_support import Script, engine, node, publish_and_run, workflow

from .conftest import make_token
from .support import Client

HOSTILE = "<script>alert('pwned')</script>"


class Hostile:
    """A connector whose error message is an attacker's markup."""

    name = "hostile"
    params_model = None

    async def invoke(self, params, ctx):
        raise A44Error("E_UPSTREAM_400", f"upstream said {HOSTILE}")


def failed_run(live, key="k1", input=None) -> str:
    ir = workflow([node("fetch"), node("charge", uses="hostile")], name="pay")
    run_id = live.run(publish_and_run(live.store, ir, input=input or {"note": HOSTILE}, key=key))
    assert live.run(engine(live.store, Script(), Hostile()).drive())[run_id] == "failed"
    return run_id


def run_state(live, run_id):
    row = live.run(live.store.get_run(run_id))
    return row["state"], row["epoch"]


def test_a_request_without_the_cookie_goes_to_the_login_form(live):
    c = Client(live.port)
    page = c.get("/runs?state=failed")
    assert page.status == 303 and page.location == "/login?next=%2Fruns%3Fstate%3Dfailed"
    assert c.get("/runs/run_x").status == 303
    assert c.post("/runs/run_x/replay", {"from_step": "a"}).status == 303
    assert c.get("/").location == "/runs"


def test_login_sets_a_strict_httponly_cookie_and_logout_clears_it(live):
    c = Client(live.port)
    form = c.get("/login")
    assert form.status == 200 and 'type="password"' in form.text
    bad = c.post("/login", {"csrf": form.field("csrf"), "next": "/runs", "token": "a44_pat_nope"})
    assert bad.status == 401 and "a44_console" not in c.cookies
    token = make_token(live)
    form = c.get("/login")
    conn_resp = c.post("/login", {"csrf": form.field("csrf"), "next": "//evil.example/x", "token": token})
    assert conn_resp.status == 303 and conn_resp.location == "/runs"         # never off this server
    cookie = next(c for c in conn_resp.set_cookies if c.startswith("a44_console="))
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "a44_console=" in cookie
    runs = c.get("/runs")
    assert runs.status == 200 and "Sign out" in runs.text
    assert c.post("/logout", {"csrf": "wrong"}).status == 403                 # CSRF on logout too
    assert c.post("/logout", {"csrf": runs.field("csrf")}).status == 303
    assert "a44_console" not in c.cookies and c.get("/runs").status == 303


def test_login_without_its_csrf_token_is_refused(live):
    c = Client(live.port)
    c.get("/login")
    page = c.post("/login", {"next": "/runs", "token": make_token(live)})
    assert page.status == 403 and "E_CSRF_INVALID" in page.text and "a44_console" not in c.cookies


def test_an_action_without_or_with_a_wrong_csrf_token_changes_nothing(live, writer):
    run_id = failed_run(live)
    before = run_state(live, run_id)
    csrf = writer.get(f"/runs/{run_id}").field("csrf")
    for form in ({"from_step": "charge", "confirm": "1", "request_id": "r1"},
                 {"from_step": "charge", "confirm": "1", "request_id": "r1", "csrf": "0" * 64},
                 {"from_step": "charge", "confirm": "1", "request_id": "r1", "csrf": csrf[:-1] + "x"}):
        page = writer.post(f"/runs/{run_id}/replay", form)
        assert page.status == 403 and "E_CSRF_INVALID" in page.text
    skip = writer.post(f"/runs/{run_id}/skip", {"step": "charge", "reason": "x"})
    assert skip.status == 403
    assert run_state(live, run_id) == before
    # the same form with its token goes through
    ok = writer.post(f"/runs/{run_id}/replay", {"from_step": "charge", "confirm": "1", "request_id": "r1",
                                                "csrf": csrf})
    assert ok.status == 303 and run_state(live, run_id) == ("pending", before[1] + 1)


def test_a_csrf_token_of_another_session_does_not_pass(live, writer):
    run_id = failed_run(live)
    other = Client(live.port)
    other.login(make_token(live, name="other"))
    theirs = other.get("/runs").field("csrf")
    page = writer.post(f"/runs/{run_id}/replay", {"from_step": "charge", "confirm": "1", "request_id": "r2",
                                                  "csrf": theirs})
    assert page.status == 403 and run_state(live, run_id)[0] == "failed"


def test_a_read_token_reads_but_cannot_act(live):
    run_id = failed_run(live)
    c = Client(live.port)
    assert c.login(make_token(live, scopes=("automation:read",))).status == 303
    page = c.get(f"/runs/{run_id}")
    assert page.status == 200
    refused = c.post(f"/runs/{run_id}/replay", {"from_step": "charge", "confirm": "1", "request_id": "r3",
                                                "csrf": page.field("csrf")})
    assert refused.status == 403 and "E_FORBIDDEN" in refused.text and "automation:write" in refused.text
    assert run_state(live, run_id) == ("failed", 0)


def test_a_token_of_another_project_sees_nothing_of_this_one(live):
    run_id = failed_run(live)
    c = Client(live.port)
    c.login(make_token(live, project="pj_elsewhere"))
    page = c.get(f"/runs/{run_id}")
    assert page.status == 404 and "E_RUN_NOT_FOUND" in page.text
    assert run_id not in c.get("/runs").text


def test_hostile_strings_are_rendered_escaped(live, writer):
    run_id = failed_run(live, input={"note": HOSTILE, HOSTILE: 1})
    for path in (f"/runs/{run_id}", "/runs", "/runs?error_code=E_UPSTREAM_400"):
        page = writer.get(path)
        assert page.status == 200
        assert "<script>alert" not in page.text and "&lt;script&gt;alert(" in page.text, path
        assert page.headers["content-security-policy"].startswith("default-src 'self'")
    # a hostile value in a filter is refused or echoed escaped, never as markup
    page = writer.get("/runs?partition_key=%3Cscript%3Ealert(1)%3C/script%3E")
    assert "<script>alert(1)" not in page.text and "&lt;script&gt;alert(1)" in page.text
    assert writer.get("/runs?state=%3Cscript%3E").status == 400
