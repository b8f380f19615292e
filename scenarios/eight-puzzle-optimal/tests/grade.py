"""Grader for eight-puzzle-optimal: exact distances for every solvable state by one BFS from the
goal, hidden boards from a fixed seed, each deliverable run bounded by a timeout.
Python 3 standard library only."""

import random
from collections import deque

from harness import Failure, Grader, expect, run

DELIVERABLE = "/app/solve8.py"
SEED = 8_008_135
GOAL = "123456780"
MOVES = {"U": -3, "D": 3, "L": -1, "R": 1}
HARDEST = ["867254301", "647850321"]  # the only two 31-move positions


def step(state, move):
    """The blank moves in direction `move`; None if that leaves the board."""
    b = state.index("0")
    if move == "U" and b < 3 or move == "D" and b > 5 or move == "L" and b % 3 == 0 or move == "R" and b % 3 == 2:
        return None
    t = b + MOVES[move]
    s = list(state)
    s[b], s[t] = s[t], s[b]
    return "".join(s)


def distances():
    dist = {GOAL: 0}
    queue = deque([GOAL])
    while queue:
        s = queue.popleft()
        for m in "UDLR":
            n = step(s, m)
            if n is not None and n not in dist:
                dist[n] = dist[s] + 1
                queue.append(n)
    return dist


def solve_with(boards, timeout):
    res = run(["python3", DELIVERABLE], timeout=timeout, stdin_bytes=("\n".join(boards) + "\n").encode())
    expect(not res.timed_out, "solve8.py %s on %d boards" % (res.describe(), len(boards)))
    expect(res.rc == 0, "solve8.py " + res.describe())
    lines = res.text().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    expect(len(lines) == len(boards), "%d output lines for %d boards" % (len(lines), len(boards)))
    return [l.rstrip("\r") for l in lines]


def judge(board, answer, dist, optimal=True):
    if board not in dist:
        expect(answer == "unsolvable", "board %s is unsolvable, got %r" % (board, answer[:40]))
        return
    expect(answer != "unsolvable", "board %s is solvable" % board)
    expect(set(answer) <= set("UDLR"), "board %s: answer %r has letters other than UDLR" % (board, answer[:40]))
    s = board
    for i, m in enumerate(answer):
        s = step(s, m)
        expect(s is not None, "board %s: move %d (%s) leaves the board" % (board, i + 1, m))
    expect(s == GOAL, "board %s: the moves end in %s, not the goal" % (board, s))
    if optimal:
        expect(len(answer) == dist[board], "board %s: %d moves, optimal is %d" % (board, len(answer), dist[board]))


def random_board(rng, solvable, dist):
    while True:
        b = "".join(rng.sample(GOAL, 9))
        if (b in dist) == solvable and b != GOAL:
            return b


def walk(rng, dist, lo, hi):
    """A solvable board whose optimal distance is in [lo, hi]."""
    while True:
        s = GOAL
        for _ in range(rng.randrange(lo, hi + 8)):
            n = step(s, rng.choice("UDLR"))
            s = n or s
        if lo <= dist[s] <= hi:
            return s


G = Grader("eight-puzzle-optimal")


@G.setup
def setup(state):
    rng = random.Random(SEED)
    dist = distances()
    state["dist"] = dist
    state["random"] = [random_board(rng, True, dist) for _ in range(40)]
    deep = [s for s, d in dist.items() if d >= 28]
    rng.shuffle(deep)
    state["hard"] = HARDEST + sorted(deep[:8])
    mix = [walk(rng, dist, 3, 12) for _ in range(8)] + [random_board(rng, False, dist) for _ in range(7)]
    rng.shuffle(mix)
    state["mix"] = mix
    fmt = [walk(rng, dist, 1, 10) for _ in range(10)]
    fmt.insert(4, GOAL)
    state["format"] = fmt
    with open("/app/examples/boards.txt") as f:
        state["examples"] = [l.strip() for l in f if l.strip()]


@G.test("solves the example boards optimally")
def t_examples(state):
    answers = solve_with(state["examples"], 30)
    for b, a in zip(state["examples"], answers):
        judge(b, a, state["dist"])


@G.test("every answer on 40 hidden boards is a legal path to the goal")
def t_valid(state):
    answers = state.setdefault("random_answers", None) or solve_with(state["random"], 40)
    state["random_answers"] = answers
    for b, a in zip(state["random"], answers):
        judge(b, a, state["dist"], optimal=False)


@G.test("every answer on 40 hidden boards is optimal")
def t_optimal(state):
    answers = state.get("random_answers") or solve_with(state["random"], 40)
    state["random_answers"] = answers
    for b, a in zip(state["random"], answers):
        judge(b, a, state["dist"])


@G.test("the hardest boards (28 to 31 moves) within the time limit")
def t_hard(state):
    answers = solve_with(state["hard"], 30)
    for b, a in zip(state["hard"], answers):
        judge(b, a, state["dist"])


@G.test("says 'unsolvable' exactly for the unsolvable boards")
def t_unsolvable(state):
    answers = solve_with(state["mix"], 30)
    for b, a in zip(state["mix"], answers):
        judge(b, a, state["dist"])


@G.test("one line per board; the goal board gets an empty line")
def t_format(state):
    answers = solve_with(state["format"], 30)
    for b, a in zip(state["format"], answers):
        judge(b, a, state["dist"])


if __name__ == "__main__":
    raise SystemExit(G.main())
