# Run under `heapkit guard` by CTest: a little of everything (imports,
# dicts, strings, regular expressions, json, classes, a generator).
import collections
import json
import re

records = [{"k": str(i) * 3, "v": [i] * 5, "s": "x" * (i % 97)} for i in range(3000)]
text = json.dumps(records)
words = collections.Counter(re.findall("[a-z]+", text))
back = json.loads(text)
assert back == records


class Node:
    def __init__(self, v, nxt=None):
        self.v = v
        self.nxt = nxt


head = None
for i in range(5000):
    head = Node(i, head)
total = 0
while head:
    total += head.v
    head = head.nxt
print("python ok", len(words), total, sum(len(r["s"]) for r in back))
