#!/usr/bin/env bash
# Reference solution: writes /app/solve8.py (one BFS from the goal over all 181 440 solvable
# positions; every answer is then a walk along BFS parent pointers, optimal by construction).
set -euo pipefail
cat > /app/solve8.py <<'EOF'
#!/usr/bin/env python3
import sys
from collections import deque

GOAL = "123456780"
OPPOSITE = {"U": "D", "D": "U", "L": "R", "R": "L"}
DELTA = {"U": -3, "D": 3, "L": -1, "R": 1}


def step(state, move):
    b = state.index("0")
    if (move == "U" and b < 3) or (move == "D" and b > 5) or (move == "L" and b % 3 == 0) or (move == "R" and b % 3 == 2):
        return None
    t = b + DELTA[move]
    s = list(state)
    s[b], s[t] = s[t], s[b]
    return "".join(s)


def toward_goal():
    """For every solvable state, the first move of a shortest path to the goal."""
    first = {GOAL: ""}
    queue = deque([GOAL])
    while queue:
        s = queue.popleft()
        for m in "UDLR":
            n = step(s, m)
            if n is not None and n not in first:
                first[n] = OPPOSITE[m]
                queue.append(n)
    return first


def main():
    boards = [line.strip() for line in sys.stdin.read().splitlines()]
    first = toward_goal()
    out = []
    for board in boards:
        if board not in first:
            out.append("unsolvable")
            continue
        path = []
        s = board
        while s != GOAL:
            m = first[s]
            path.append(m)
            s = step(s, m)
        out.append("".join(path))
    sys.stdout.write("".join(line + "\n" for line in out))


main()
EOF
chmod 0755 /app/solve8.py
