"""Unit tests of the sidecar's pure parts (stdlib unittest):
    /usr/bin/python3 -B -m unittest discover -s sidecar/tests"""

from __future__ import annotations

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from trajrl_policy.kinds import (  # noqa: E402
    AdvisersPolicy,
    EscalatePolicy,
    PinPolicy,
    adviser_messages,
    advisers_engage,
    notes_message,
    parse_policy_config,
)
from trajrl_policy.runtime import SessionStore  # noqa: E402
from trajrl_policy.spec import PolicyConfigError  # noqa: E402
from trajrl_policy.signals import (  # noqa: E402
    SIGNAL_NAMES,
    compute_signals,
    estimate_tokens,
    session_key,
    tool_result_is_error,
    tool_result_is_timeout,
)
from trajrl_policy.sse import (  # noqa: E402
    RawEventSplitter,
    SSEParser,
    StreamAssembler,
    is_usage_only_event,
    normalise_message,
    render_chunks,
)

SYS = {"role": "system", "content": "You are an agent."}
USER = {"role": "user", "content": "Do the task."}


def call(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def assistant(*calls: dict, content: str | None = None) -> dict:
    m = {"role": "assistant", "content": content}
    if calls:
        m["tool_calls"] = list(calls)
    return m


def tool(cid: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def ok(cid: str, out: str = "fine") -> dict:
    return tool(cid, json.dumps({"output": out, "exit_code": 0, "error": None}))


def convo(*turns: tuple[dict, list[dict]]) -> list[dict]:
    out = [SYS, USER]
    for a, results in turns:
        out.append(a)
        out.extend(results)
    return out


class ToolErrorTest(unittest.TestCase):
    def test_structured_results_are_judged_by_fields(self) -> None:
        self.assertTrue(tool_result_is_error(json.dumps({"output": "", "exit_code": 2})))
        self.assertTrue(tool_result_is_error(json.dumps({"output": "", "error": "boom"})))
        self.assertTrue(tool_result_is_error(json.dumps({"success": False})))
        self.assertTrue(tool_result_is_error(json.dumps({"output": "", "timed_out": True})))
        # the output mentions errors, the fields say it went fine
        self.assertFalse(tool_result_is_error(json.dumps({"output": "Error: none found\n", "exit_code": 0})))
        self.assertFalse(tool_result_is_error(json.dumps({"exit_code": False, "error": None})))

    def test_the_agents_status_trailer_decides(self) -> None:
        self.assertTrue(tool_result_is_error("make: *** [all] Error 2\n[exit code: 2]"))
        self.assertTrue(tool_result_is_error("(no output)\n[killed by SIGKILL; exit code: 137]"))
        self.assertFalse(tool_result_is_error("error: nothing to commit\nTraceback (most recent call last)\n[exit code: 0]"))
        timed = "partial output\n[timed out after 60 s: the command and its process group were killed]"
        self.assertTrue(tool_result_is_error(timed))
        self.assertTrue(tool_result_is_timeout(timed))
        self.assertFalse(tool_result_is_timeout("ran the timeout tests\n[exit code: 0]"))
        self.assertTrue(tool_result_is_timeout("(no output)\n[exit code: 124]"))
        # the agent's failed file tools
        self.assertTrue(tool_result_is_error("error: no such file: /app/x"))

    def test_text_results_by_pattern(self) -> None:
        for text in (
            "Traceback (most recent call last):\n  File x",
            "bash: foo: command not found",
            "cat: /x: No such file or directory",
            "ModuleNotFoundError: No module named 'y'",
            "fatal: not a git repository",
            "[exit code: 1]",
            "exit status 127",
            "Command timed out after 60s",
        ):
            self.assertTrue(tool_result_is_error(text), text)
        for text in ("total 8\n-rw-r--r-- 1 a b", "error_count = 0", "no errors", "exit code 0"):
            self.assertFalse(tool_result_is_error(text), text)


class SignalsTest(unittest.TestCase):
    def test_nothing_on_a_healthy_start(self) -> None:
        self.assertEqual(compute_signals([SYS, USER]), [])
        msgs = convo((assistant(call("a", "read_file", {"path": "/workspace/SKILL.md"})), [ok("a")]))
        self.assertEqual(compute_signals(msgs, gap_s=1.0), [])

    def test_toolerr_only_for_the_latest_results(self) -> None:
        bad = tool("a", json.dumps({"output": "x", "exit_code": 1}))
        msgs = convo((assistant(call("a", "terminal", {"command": "make"})), [bad]))
        self.assertEqual(compute_signals(msgs), ["toolerr"])
        later = msgs + [assistant(call("b", "terminal", {"command": "ls"})), ok("b")]
        self.assertNotIn("toolerr", compute_signals(later))
        # a user message after the results does not hide them
        self.assertIn("toolerr", compute_signals(msgs + [{"role": "user", "content": "go on"}]))

    def test_stall_from_the_gap_or_a_timeout(self) -> None:
        msgs = convo((assistant(call("a", "terminal", {"command": "sleep 1"})), [ok("a")]))
        self.assertEqual(compute_signals(msgs, gap_s=89.9, stall_s=90), [])
        self.assertEqual(compute_signals(msgs, gap_s=90.0, stall_s=90), ["stall"])
        self.assertEqual(compute_signals(msgs, gap_s=None, stall_s=1), [])
        timed = convo((assistant(call("a", "terminal", {"command": "server"})), [tool("a", json.dumps({"exit_code": 124}))]))
        self.assertEqual(compute_signals(timed), ["stall", "toolerr"])

    def test_len(self) -> None:
        big = [SYS, {"role": "user", "content": "x" * 120_000}]
        self.assertEqual(compute_signals(big), ["len"])
        self.assertGreaterEqual(estimate_tokens(big), 40_000)
        self.assertEqual(compute_signals(big, len_tokens=10**9), [])
        self.assertEqual(estimate_tokens([{"c": "é" * 10}]), 10 + 4)  # [{"c":""}] is 10 ASCII chars → 4

    def test_repeat_same_call_three_times_in_six_turns(self) -> None:
        same = lambda cid: (assistant(call(cid, "terminal", {"command": "ls", "timeout": 5})), [ok(cid, cid)])  # noqa: E731
        other = lambda cid: (assistant(call(cid, "terminal", {"command": f"echo {cid}"})), [ok(cid, cid)])  # noqa: E731
        self.assertNotIn("repeat", compute_signals(convo(same("a"), other("b"), same("c"))))
        msgs = convo(same("a"), other("b"), same("c"), other("d"), same("e"))
        self.assertIn("repeat", compute_signals(msgs))
        # key order and spacing of the arguments do not matter
        reordered = assistant({"id": "f", "type": "function", "function": {"name": "terminal", "arguments": '{"timeout":5, "command":"ls"}'}})
        self.assertIn("repeat", compute_signals(convo(same("a"), same("c"), (reordered, [ok("f", "f")]))))
        # outside the window of six assistant turns it no longer counts
        far = convo(same("a"), same("b"), other("c"), other("d"), other("e"), other("f"), other("g"), same("h"))
        self.assertNotIn("repeat", compute_signals(far))

    def test_noprog_when_six_results_taught_nothing(self) -> None:
        turns = [(assistant(call(f"c{i}", "terminal", {"command": f"cmd {i}"})), [ok(f"c{i}", "same output")]) for i in range(6)]
        # the first "same output" was new; five repeats are not yet six unproductive results
        self.assertNotIn("noprog", compute_signals(convo(*turns)))
        turns.append((assistant(call("c6", "terminal", {"command": "x"})), [tool("c6", "Error: nope")]))
        self.assertIn("noprog", compute_signals(convo(*turns)))
        fresh = turns + [(assistant(call("c7", "terminal", {"command": "y"})), [ok("c7", "something new")])]
        self.assertNotIn("noprog", compute_signals(convo(*fresh)))

    def test_order_is_canonical(self) -> None:
        self.assertEqual(SIGNAL_NAMES, ("stall", "len", "toolerr", "noprog", "repeat"))


class SessionTest(unittest.TestCase):
    def test_key_from_first_five_messages_ignores_reserialisation(self) -> None:
        a = convo((assistant(call("a", "read_file", {"path": "/x"})), [ok("a")]), (assistant(content="hi"), []))
        b = json.loads(json.dumps(a))
        b[2]["content"] = ""  # None vs "": the same message
        b[2]["tool_calls"][0]["function"]["arguments"] = '{ "path" : "/x" }'
        self.assertEqual(session_key(a), session_key(b))
        self.assertEqual(session_key(a[:5]), session_key(a))
        self.assertNotEqual(session_key(a[:4]), session_key(a))

    def test_provisional_sessions_are_promoted(self) -> None:
        store = SessionStore()
        t1 = [SYS, USER]
        s1 = store.resolve(t1)
        s1.data["x"] = 1
        t2 = t1 + [assistant(call("a", "read_file", {"path": "/workspace/INSTRUCTION.md"})), tool("a", "task A")]
        self.assertIs(store.resolve(t2), s1)
        t3 = t2 + [assistant(call("b", "terminal", {"command": "ls"})), ok("b")]
        s3 = store.resolve(t3)
        self.assertIs(s3, s1)
        self.assertEqual(s3.data, {"x": 1})
        self.assertIs(store.resolve(t3 + [assistant(content="done")]), s1)
        # a second conversation with the same system and user prompt is a new session
        other = store.resolve(t1)
        self.assertIsNot(other, s1)
        u2 = t1 + [assistant(call("a", "read_file", {"path": "/workspace/INSTRUCTION.md"})), tool("a", "task B")]
        self.assertIs(store.resolve(u2 + [assistant(content="?")]), other)
        self.assertIs(store.resolve(t3), s1)
        self.assertEqual(len(store), 2)

    def test_lru_bound(self) -> None:
        store = SessionStore(max_sessions=3)
        for i in range(5):
            store.resolve([SYS, {"role": "user", "content": f"u{i}"}, assistant(content="a"), USER, USER])
        self.assertEqual(len(store), 3)


class LazyImportTest(unittest.TestCase):
    def test_spec_loads_without_the_server_stack(self) -> None:
        import subprocess

        code = (
            "import sys; sys.path.insert(0, %r); import trajrl_policy.spec as s; "
            "s.parse_policy_spec('{\"kind\": \"pin\", \"model\": \"m\"}'); "
            "print('aiohttp' in sys.modules, 'httpx' in sys.modules)"
        ) % os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        out = subprocess.run([sys.executable, "-B", "-c", code], capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout.strip(), "False False")

    def test_public_names(self) -> None:
        import trajrl_policy

        self.assertTrue(callable(trajrl_policy.serve))
        self.assertTrue(issubclass(trajrl_policy.PinPolicy, trajrl_policy.Policy))
        with self.assertRaises(AttributeError):
            trajrl_policy.nope  # noqa: B018


class KindsTest(unittest.TestCase):
    def bad(self, text: str, needle: str) -> None:
        with self.assertRaises(PolicyConfigError) as cm:
            parse_policy_config(text)
        self.assertIn(needle, str(cm.exception))

    def test_valid_kinds_and_defaults(self) -> None:
        p = parse_policy_config('{"kind": "pin", "model": "glm-5.3-flash"}')
        self.assertIsInstance(p, PinPolicy)
        e = parse_policy_config('{"kind": "escalate", "cheap": "a", "strong": "b"}')
        self.assertIsInstance(e, EscalatePolicy)
        self.assertEqual((e.signals, e.stall_s), (("stall", "toolerr", "repeat"), 90.0))
        a = parse_policy_config('{"kind": "advisers", "writer": "kimi-k3", "advisers": ["x", "y"], "every": 2, "temperature": 0}')
        self.assertIsInstance(a, AdvisersPolicy)
        self.assertEqual((a.advisers, a.max_tokens, a.temperature, a.every), (("x", "y"), 256, 0.0, 2))

    def test_rejections_name_the_problem(self) -> None:
        self.bad("{", "not valid JSON")
        self.bad("[]", "must be a JSON object")
        self.bad('{"model": "x"}', 'missing "kind"')
        self.bad('{"kind": "route", "model": "x"}', 'unknown kind "route"')
        self.bad('{"kind": "pin"}', 'missing required field(s) "model"')
        self.bad('{"kind": "pin", "model": 3}', "pin.model must be a model name")
        self.bad('{"kind": "pin", "model": ""}', "pin.model must be a model name")
        self.bad('{"kind": "pin", "model": "m", "extra": 1}', 'unknown field(s) "extra"')
        self.bad('{"kind": "escalate", "cheap": "a", "strong": "b", "signals": ["slow"]}', 'unknown signal "slow"')
        self.bad('{"kind": "escalate", "cheap": "a", "strong": "b", "signals": []}', "non-empty list")
        self.bad('{"kind": "escalate", "cheap": "a", "strong": "b", "signals": "stall"}', "non-empty list")
        self.bad('{"kind": "escalate", "cheap": "a", "strong": "b", "signals": ["len", "len"]}', "listed twice")
        self.bad('{"kind": "escalate", "cheap": "a", "strong": "b", "stall_s": "60"}', "stall_s must be a number")
        self.bad('{"kind": "escalate", "cheap": "a", "strong": "b", "stall_s": true}', "stall_s must be a number")
        self.bad('{"kind": "escalate", "cheap": "a", "strong": "b", "stall_s": 0}', "between 1 and 3600")
        self.bad('{"kind": "advisers", "writer": "w"}', '"advisers"')
        self.bad('{"kind": "advisers", "writer": "w", "advisers": []}', "non-empty list")
        self.bad('{"kind": "advisers", "writer": "w", "advisers": ["a", 7]}', "advisers.advisers[1]")
        self.bad('{"kind": "advisers", "writer": "w", "advisers": ["a"], "max_tokens": 1.5}', "max_tokens must be an integer")
        self.bad('{"kind": "advisers", "writer": "w", "advisers": ["a"], "every": 0}', "every must be between")
        self.bad('{"kind": "advisers", "writer": "w", "advisers": ["a"], "temperature": 3}', "temperature must be between")

    def test_advisers_engage_once_tool_results_exist(self) -> None:
        self.assertFalse(advisers_engage([SYS, USER], 1))
        one = convo((assistant(call("a", "read_file", {"path": "/x"})), [ok("a")]))
        self.assertTrue(advisers_engage(one, 1))
        two = one + [assistant(call("b", "terminal", {"command": "ls"})), ok("b")]
        three = two + [assistant(call("c", "terminal", {"command": "ls"})), ok("c")]
        self.assertEqual([advisers_engage(m, 2) for m in (one, two, three)], [True, False, True])

    def test_adviser_prompt_is_bounded_text(self) -> None:
        msgs = convo(*[(assistant(call(f"c{i}", "terminal", {"command": "x" * 900})), [ok(f"c{i}", "y" * 5000)]) for i in range(30)])
        prompt = adviser_messages(msgs)
        self.assertEqual([m["role"] for m in prompt], ["system", "user"])
        self.assertLess(len(prompt[1]["content"]), 60_000)
        self.assertIn("messages omitted", prompt[1]["content"])
        note = notes_message([("m1", "hint: a/b"), ("m2", "check paths")])
        self.assertEqual(note["role"], "user")
        self.assertIn("(m1) hint: a/b", note["content"])


class SSETest(unittest.TestCase):
    def test_parser_handles_split_crlf_comments_and_multiline(self) -> None:
        p = SSEParser()
        raw = b': keep-alive\r\n\r\ndata: {"a":\r\ndata: 1}\r\n\r\ndata: [DONE]\n\n'
        events: list[str] = []
        for i in range(len(raw)):
            events += p.feed(raw[i : i + 1])
        self.assertEqual(events, ['{"a":\n1}', "[DONE]"])
        self.assertEqual(SSEParser().feed(b"data: x"), [])
        q = SSEParser()
        q.feed(b"data: x")
        self.assertEqual(q.close(), ["x"])

    def test_render_then_assemble_round_trips(self) -> None:
        msg = normalise_message(
            {"content": "thinking", "tool_calls": [{"function": {"name": "terminal", "arguments": {"command": "ls"}}}]}
        )
        events = render_chunks(msg, model="m", usage={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}, include_usage=True)
        self.assertEqual(events[-1], b"data: [DONE]\n\n")
        a = StreamAssembler()
        p = SSEParser()
        for ev in events:
            for d in p.feed(ev):
                a.feed_event(d)
        out = a.message()
        self.assertEqual(out["content"], "thinking")
        self.assertEqual(out["tool_calls"][0]["function"], {"name": "terminal", "arguments": '{"command": "ls"}'})
        self.assertEqual((a.finish_reason, a.model, a.usage["completion_tokens"], a.done), ("tool_calls", "m", 4, True))

    def test_assembler_merges_tool_call_fragments(self) -> None:
        a = StreamAssembler()
        frags = [
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "t1", "type": "function", "function": {"name": "ter", "arguments": ""}}]}}]},
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "minal", "arguments": '{"comm'}}]}}]},
            {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'and":"ls"}'}}]}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
        for f in frags:
            a.feed(f)
        self.assertEqual(a.message()["tool_calls"], [{"id": "t1", "type": "function", "function": {"name": "terminal", "arguments": '{"command":"ls"}'}}])

    def test_raw_splitter_keeps_events_byte_for_byte(self) -> None:
        raw = b'data: {"a":1}\n\n: ping\r\n\r\ndata: {"choices":[],"usage":{"prompt_tokens":1}}\n\ndata: [DONE]\n\n'
        sp = RawEventSplitter()
        events: list[bytes] = []
        for i in range(0, len(raw), 7):
            events += sp.feed(raw[i : i + 7])
        self.assertEqual(b"".join(events), raw)
        self.assertEqual(len(events), 4)
        self.assertEqual([is_usage_only_event(e) for e in events], [False, False, True, False])
        self.assertEqual(sp.close(), b"")
        self.assertFalse(is_usage_only_event(b'data: {"choices":[{"index":0}],"usage":{}}\n\n'))

    def test_render_rejects_non_messages(self) -> None:
        with self.assertRaises(TypeError):
            normalise_message(42)
        with self.assertRaises(TypeError):
            normalise_message({"content": 3})
        self.assertEqual(normalise_message("hi"), {"role": "assistant", "content": "hi"})


if __name__ == "__main__":
    unittest.main()
