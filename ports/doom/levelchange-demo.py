#!/usr/bin/env python3
"""ports/doom/levelchange-demo.py OUT.lmp EPISODE MAP - writes a demo (DOOM
1.9 format, ours) that stands in the first level for the deathmatch timer
(the engine run with -timer 1 ends the level after 2100 tics), presses fire
through the intermission, and stands in the next level for 350 tics: with
-timedemo it shows the zone across a level change (docs/doom.md's maps,
the doom bench's Z_FreeTags time). One player, deathmatch flag on (the
timer runs only in deathmatch), skill 3."""
import sys

out, episode, level = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
header = bytes([109, 2, episode, level, 1, 0, 0, 0, 0, 1, 0, 0, 0])
tics = []
tics += [(0, 0, 0, 0)] * 2110  # the level, until the timer ends it
for i in range(600):  # the intermission: fire pressed 5 tics in every 10
    tics.append((0, 0, 0, 1 if i % 10 < 5 else 0))
tics += [(0, 0, 0, 0)] * 350  # the next level
body = b"".join(bytes([f & 0xFF, s & 0xFF, a & 0xFF, b]) for f, s, a, b in tics)
with open(out, "wb") as f:
    f.write(header + body + b"\x80")
