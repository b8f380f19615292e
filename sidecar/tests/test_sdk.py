"""Unit tests of the SDK single file (stdlib unittest), loaded by path as upstream's own tests load its
runtime (`rt`): /usr/bin/python3 -B -m unittest discover -s sidecar/tests

The `Upstream*` cases are upstream's `rt.*` tests (tests/test_policy.py), their vectors unchanged."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SDK_FILE = os.path.join(HERE, "..", "sdk", "trajrl_policy.py")


def load_sdk(name: str = "trajrl_policy_under_test"):
    spec = importlib.util.spec_from_file_location(name, SDK_FILE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


rt = load_sdk()


class Patch:
    """monkeypatch.setattr for a module global, undone on exit."""

    def __init__(self, mod, name: str, value) -> None:
        self.mod, self.name, self.value = mod, name, value

    def __enter__(self):
        self.old = getattr(self.mod, self.name)
        setattr(self.mod, self.name, self.value)

    def __exit__(self, *exc):
        setattr(self.mod, self.name, self.old)


# --- upstream's rt.* tests ------------------------------------------------------------------------


class UpstreamRuntimeTests(unittest.TestCase):
    def test_runtime_file_ships(self) -> None:
        with open(SDK_FILE, encoding="utf-8") as fh:
            src = fh.read()
        self.assertIn("def serve(", src)
        self.assertIn("class AdvisersPolicy", src)

    def test_session_key_uses_first_five_messages(self) -> None:
        base = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"},
                {"role": "tool", "content": "skill"}, {"role": "tool", "content": "instruction-1"}]
        other = base[:4] + [{"role": "tool", "content": "instruction-2"}]
        self.assertEqual(rt.session_key(base), rt.session_key(base + [{"role": "assistant", "content": "later"}]))
        self.assertNotEqual(rt.session_key(base), rt.session_key(other))
        self.assertTrue(rt.session_key(base[:2]).startswith("pre"))

    def test_transcript_signals(self) -> None:
        sess = {"t0": time.time() - 1000, "last_finish": "length"}
        msgs = [{"role": "tool", "content": "Traceback (most recent call last): boom"}] * 3
        fired = rt.transcript_signals(msgs, sess)
        self.assertLessEqual({"stall", "len", "toolerr"}, set(fired))
        self.assertNotIn(
            "noprog", rt.transcript_signals([{"role": "assistant", "content": "cat > /app/run.py"}] * 8, {"t0": time.time()})
        )

    def test_rendered_sse_roundtrip(self) -> None:
        msg = {"content": "hello", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]}
        out = rt.Rendered(msg, "auto", "tool_calls", {"prompt_tokens": 1}, True, "req1").sse().decode()
        events = [json.loads(line[6:]) for line in out.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]
        self.assertEqual(events[0]["choices"][0]["delta"]["content"], "hello")
        self.assertEqual(events[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "terminal")
        self.assertEqual(events[-1]["choices"][0]["finish_reason"], "tool_calls")
        self.assertTrue(out.endswith("data: [DONE]\n\n"))

    def test_policy_from_config(self) -> None:
        self.assertEqual(rt.policy_from_config({"kind": "pin", "model": "glm-5.3-flash"}).name, "pin:glm-5.3-flash")
        p = rt.policy_from_config({"kind": "escalate", "cheap": "a", "strong": "b", "signals": ["stall"]})
        self.assertEqual(p.signals, {"stall"})
        p = rt.policy_from_config({"kind": "advisers", "writer": "kimi-k3", "advisers": ["x", "y"]})
        self.assertEqual((p.writer, p.advisers), ("kimi-k3", ["x", "y"]))
        with self.assertRaises(ValueError):
            rt.policy_from_config({"kind": "nope"})

    def test_runtime_passthrough_auth_headers(self) -> None:
        with Patch(rt, "UPSTREAM_AUTH", "passthrough"):
            srv = rt.Server(rt.PinPolicy("glm-5.3-flash"))
            routes = {r.resource.canonical for r in srv.app.router.routes()}
            self.assertLessEqual({"/v1/chat/completions", "/v1/models", "/health"}, routes)
            self.assertEqual(srv.hdr_for("Bearer sk-customer")["Authorization"], "Bearer sk-customer")
            self.assertEqual(srv.hdr_for(None)["Authorization"], f"Bearer {rt.EPISODE_TOKEN}")
        with Patch(rt, "UPSTREAM_AUTH", "token"):
            self.assertEqual(srv.hdr_for("Bearer sk-customer")["Authorization"], f"Bearer {rt.EPISODE_TOKEN}")


# --- the signals' thresholds and windows ----------------------------------------------------------


def tool(text: str) -> dict:
    return {"role": "tool", "content": text}


def assistant(content=None, calls=None) -> dict:
    m = {"role": "assistant", "content": content}
    if calls is not None:
        m["tool_calls"] = calls
    return m


def terminal(command: str) -> list[dict]:
    return [{"id": "c", "type": "function", "function": {"name": "terminal", "arguments": json.dumps({"command": command})}}]


class SignalTests(unittest.TestCase):
    def test_stall_is_the_session_age_past_stall_s(self) -> None:
        now = time.time()
        self.assertIn("stall", rt.transcript_signals([], {"t0": now - 421}))
        self.assertNotIn("stall", rt.transcript_signals([], {"t0": now - 400}))
        self.assertIn("stall", rt.transcript_signals([], {"t0": now - 91}, stall_s=90))
        self.assertNotIn("stall", rt.transcript_signals([], {}))  # no t0: age 0

    def test_len_is_the_previous_finish_reason(self) -> None:
        self.assertEqual(rt.transcript_signals([], {"t0": time.time(), "last_finish": "length"}), ["len"])
        self.assertEqual(rt.transcript_signals([], {"t0": time.time(), "last_finish": "stop"}), [])

    def test_toolerr_needs_the_last_three_tool_results_to_read_like_errors(self) -> None:
        sess = {"t0": time.time()}
        err = tool("bash: foo: command not found")
        fine = tool("total 0")
        self.assertIn("toolerr", rt.transcript_signals([err, err, err], sess))
        self.assertNotIn("toolerr", rt.transcript_signals([err, err], sess))  # fewer than three
        self.assertNotIn("toolerr", rt.transcript_signals([err, fine, err], sess))
        self.assertIn("toolerr", rt.transcript_signals([fine, err, err, err], sess))
        self.assertIn("toolerr", rt.transcript_signals([err, err], sess, k_toolerr=2))
        # markers are searched in the first 400 characters, case-insensitively
        self.assertTrue(rt.tool_is_error("PERMISSION DENIED"))
        self.assertTrue(rt.tool_is_error("exit code 127"))
        self.assertTrue(rt.tool_is_error(json.dumps({"output": "", "exit_code": 0, "error": "Failed"})))
        self.assertFalse(rt.tool_is_error("x" * 400 + "Traceback"))
        self.assertFalse(rt.tool_is_error(json.dumps({"output": "ok", "exit_code": 0})))

    def test_noprog_needs_eight_assistant_turns_without_a_deliverable_hint(self) -> None:
        sess = {"t0": time.time()}
        looking = assistant(calls=terminal("ls -la /app"))
        self.assertIn("noprog", rt.transcript_signals([looking] * 8, sess))
        self.assertNotIn("noprog", rt.transcript_signals([looking] * 7, sess))
        writing = assistant(calls=terminal("echo 42 > /app/out.txt"))
        self.assertNotIn("noprog", rt.transcript_signals([writing] + [looking] * 7, sess))
        self.assertIn("noprog", rt.transcript_signals([writing] + [looking] * 8, sess))  # out of the window
        self.assertNotIn("noprog", rt.transcript_signals([assistant("I will use tee to save it")] * 8, sess))

    def test_repeat_is_three_identical_tool_calling_turns(self) -> None:
        sess = {"t0": time.time()}
        same = assistant(calls=terminal("make"))
        self.assertEqual(rt.transcript_signals([same, tool("ok"), same, tool("ok"), same], sess), ["repeat"])
        self.assertNotIn("repeat", rt.transcript_signals([same, same], sess))
        self.assertNotIn("repeat", rt.transcript_signals([same, assistant(calls=terminal("make test")), same], sess))
        self.assertNotIn("repeat", rt.transcript_signals([same, same, assistant("done")], sess))
        # key order inside a call does not matter (sort_keys), argument text does
        swapped = assistant(calls=[{"function": {"arguments": json.dumps({"command": "make"}), "name": "terminal"},
                                    "type": "function", "id": "c"}])
        self.assertIn("repeat", rt.transcript_signals([same, swapped, same], sess))

    def test_order_and_content_text(self) -> None:
        sess = {"t0": time.time() - 1000, "last_finish": "length"}
        same = assistant(calls=terminal("cat README"))
        msgs = [tool("error: x")] * 3 + [same] * 8
        self.assertEqual(rt.transcript_signals(msgs, sess), ["stall", "len", "toolerr", "noprog", "repeat"])
        self.assertEqual(rt.content_text([{"type": "text", "text": "a"}, "skip", {"text": "b"}]), "ab")
        self.assertEqual(rt.content_text(None), "")
        self.assertEqual(rt.content_text(7), "7")

    def test_session_key_reads_role_and_text_of_the_head(self) -> None:
        five = [{"role": "system", "content": "S"}, {"role": "user", "content": [{"type": "text", "text": "U"}]},
                {"role": "assistant", "content": None, "tool_calls": terminal("a")}, tool("x"), tool("y")]
        key = rt.session_key(five)
        self.assertRegex(key, r"^s[0-9a-f]{12}$")
        # tool calls are not part of the key; text beyond 6000 characters neither
        other_calls = five[:2] + [{"role": "assistant", "content": None, "tool_calls": terminal("b")}] + five[3:]
        self.assertEqual(rt.session_key(other_calls), key)
        long_a = five[:4] + [tool("y" * 6000 + "a")]
        long_b = five[:4] + [tool("y" * 6000 + "b")]
        self.assertEqual(rt.session_key(long_a), rt.session_key(long_b))
        # a short conversation is keyed by its first two messages
        self.assertEqual(rt.session_key(five[:2]), rt.session_key(five[:4]))
        self.assertRegex(rt.session_key(five[:3]), r"^pre[0-9a-f]{12}$")


# --- policy.json: upstream's defaults and leniency ------------------------------------------------


class PolicyConfigTests(unittest.TestCase):
    def test_defaults_are_upstreams(self) -> None:
        e = rt.policy_from_config({"kind": "escalate", "cheap": "a", "strong": "b"})
        self.assertEqual((e.signals, e.stall_s, e.name), ({"stall", "toolerr", "repeat"}, 420.0, "escalate:a->b"))
        a = rt.policy_from_config({"kind": "advisers", "writer": "w", "advisers": ["x"]})
        self.assertEqual((a.max_tokens, a.temperature, a.every, a.name), (400, 0.7, 1, "advisers:w|x"))
        self.assertEqual(rt.policy_from_config({}).name, f"pin:{rt.DEFAULT_MODEL}")
        self.assertEqual(rt.policy_from_config({"kind": "PIN", "model": "m"}).name, "pin:m")
        self.assertEqual(rt.policy_from_config({"kind": None}).name, f"pin:{rt.DEFAULT_MODEL}")

    def test_unknown_fields_are_ignored(self) -> None:
        p = rt.policy_from_config({"kind": "pin", "model": "m", "comment": "mine", "schema": 2})
        self.assertEqual(p.name, "pin:m")
        a = rt.policy_from_config({"kind": "advisers", "writer": "w", "advisers": ["x"], "max_words": 3, "x": []})
        self.assertEqual(a.advisers, ["x"])

    def test_values_go_through_pythons_conversions(self) -> None:
        e = rt.policy_from_config({"kind": "escalate", "cheap": "a", "strong": "b", "stall_s": "90", "signals": "stall"})
        self.assertEqual(e.stall_s, 90.0)
        self.assertEqual(e.signals, set("stall"))  # a string is its characters: no signal matches
        a = rt.policy_from_config({"kind": "advisers", "writer": "w", "advisers": ["x"], "max_tokens": 99.9, "every": 0})
        self.assertEqual((a.max_tokens, a.every), (99, 1))
        self.assertEqual(rt.policy_from_config({"kind": "escalate", "cheap": "a", "strong": "b", "signals": []}).signals,
                         {"stall", "toolerr", "repeat"})

    def test_what_stops_the_sidecar(self) -> None:
        bad = [
            {"kind": "route"},
            {"kind": 3},
            {"kind": "escalate", "cheap": "a"},
            {"kind": "escalate", "cheap": "a", "strong": "b", "stall_s": "soon"},
            {"kind": "escalate", "cheap": "a", "strong": "b", "stall_s": None},
            {"kind": "escalate", "cheap": "a", "strong": "b", "signals": 5},
            {"kind": "advisers", "writer": "w"},
            {"kind": "advisers", "writer": "w", "advisers": [1, 2]},
            {"kind": "advisers", "writer": "w", "advisers": None},
            {"kind": "advisers", "writer": "w", "advisers": ["x"], "max_tokens": "4.5"},
        ]
        for cfg in bad:
            with self.subTest(cfg=cfg), self.assertRaises(Exception):
                rt.policy_from_config(cfg)
        for not_an_object in ([], "pin", 3, None):
            with self.subTest(cfg=not_an_object), self.assertRaises(AttributeError):
                rt.policy_from_config(not_an_object)


class SurfaceTests(unittest.TestCase):
    def test_the_names_a_policy_may_use(self) -> None:
        for name in ("Policy", "PinPolicy", "EscalatePolicy", "AdvisersPolicy", "Ctx", "Rendered", "Server",
                     "UpstreamResponse", "serve", "main", "log", "session_key", "transcript_signals", "tool_is_error",
                     "content_text", "policy_from_config", "POLICY_PORT", "UPSTREAM_URL", "EPISODE_TOKEN",
                     "POLICY_DIR", "POLICY_LOG", "DEFAULT_MODEL", "UPSTREAM_AUTH"):
            self.assertTrue(hasattr(rt, name), name)
        self.assertEqual(rt.Policy.name, "policy")
        self.assertEqual(rt.PinPolicy("m").name, "pin:m")

    def test_ctx_carries_the_request_state(self) -> None:
        srv = rt.Server(rt.PinPolicy("m"))
        srv.remaining_usd = 0.25
        msgs = [{"role": "user", "content": "hi"}]
        sess = {"t0": time.time() - 500, "turn": 3, "last_finish": "length"}
        ctx = rt.Ctx(srv, msgs, sess, "chatcmpl-x-3")
        self.assertIs(ctx.messages, msgs)
        self.assertIs(ctx.session, sess)
        self.assertEqual((ctx.req_id, ctx.remaining_usd), ("chatcmpl-x-3", 0.25))
        self.assertEqual(ctx.signals(), ["stall", "len"])
        self.assertEqual(ctx.signals(stall_s=600), ["len"])
        self.assertEqual(ctx.hdr["Authorization"], f"Bearer {rt.EPISODE_TOKEN}")
        r = ctx.render({"content": "done"})
        self.assertEqual((r.model, r.finish, r.usage, r.req_id), ("auto", "stop", None, "chatcmpl-x-3"))
        body = json.loads(r.json())
        self.assertEqual(body["choices"][0]["message"], {"role": "assistant", "content": "done"})
        events = [json.loads(e[6:]) for e in r.sse().decode().split("\n\n") if e.startswith("data: {")]
        self.assertEqual([e["choices"][0]["finish_reason"] for e in events], [None, "stop"])
        self.assertIsNone(events[-1]["usage"])

    def test_budget_header(self) -> None:
        srv = rt.Server(rt.PinPolicy("m"))
        srv.note_budget({"x-trajrl-budget-remaining-usd": "0.125"})
        self.assertEqual(srv.remaining_usd, 0.125)
        srv.note_budget({"x-trajrl-budget-remaining-usd": "n/a"})
        srv.note_budget({})
        self.assertEqual(srv.remaining_usd, 0.125)


if __name__ == "__main__":
    sys.exit(unittest.main())
