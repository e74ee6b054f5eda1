"""Reads the JSON lines `agents-control device connect` prints, for tests/docker/tryout.

  stamp                    copy stdin to stdout line by line, adding to each JSON object the
                           time it was read ("at", Unix seconds), so the test can time events
  has FILE JSON            exit 0 if some event has every field of the object JSON, equal
  count FILE JSON          print how many events have every field of JSON
  copy FILE                print the copy of the last `connected` event (empty if none)
  connections FILE         print how many `connected` events there are
  first-at FILE JSON AFTER print the "at" of the first event having every field of JSON whose
                           "at" is later than AFTER (empty if none)
  acked FILE TO [AFTER]    print the highest seq acked by TO (0 if none; acks are cumulative),
                           among the events later than AFTER (a restarted device counts anew)
  stream FILE FROM TAG N   check the messages from FROM whose body is {"stream": TAG, "n": i}:
                           print {"received", "distinct", "lost", "doubled", "in_order"} and
                           exit 0 only if 1..N each arrived exactly once, in order
"""

import json
import sys
import time


def events(path):
    with open(path, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                yield event


def matching(path, want):
    return [e for e in events(path) if all(e.get(k) == v for k, v in want.items())]


def stamp():
    for line in sys.stdin:
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if isinstance(event, dict):
            event["at"] = time.time()
            line = json.dumps(event, separators=(",", ":")) + "\n"
        sys.stdout.write(line)
        sys.stdout.flush()
    return 0


def main(argv):
    if argv[1:] == ["stamp"]:
        return stamp()
    command, path = argv[1], argv[2]
    if command == "has":
        return 0 if matching(path, json.loads(argv[3])) else 1
    if command == "count":
        print(len(matching(path, json.loads(argv[3]))))
        return 0
    if command == "copy":
        copies = [e.get("copy", "") for e in events(path) if e.get("event") == "connected"]
        print(copies[-1] if copies else "")
        return 0
    if command == "connections":
        print(sum(1 for e in events(path) if e.get("event") == "connected"))
        return 0
    if command == "first-at":
        after = float(argv[4])
        times = [e["at"] for e in matching(path, json.loads(argv[3])) if e.get("at", 0) > after]
        print(f"{min(times):.3f}" if times else "")
        return 0
    if command == "acked":
        after = float(argv[4]) if len(argv) > 4 else 0.0
        seqs = [
            e.get("seq", 0)
            for e in events(path)
            if e.get("event") == "acked" and e.get("to") == argv[3] and e.get("at", 0) > after
        ]
        print(max(seqs, default=0))
        return 0
    if command == "stream":
        sender, tag, total = argv[3], argv[4], int(argv[5])
        got = [
            e["body"]["n"]
            for e in events(path)
            if e.get("event") == "message"
            and e.get("from") == sender
            and isinstance(e.get("body"), dict)
            and e["body"].get("stream") == tag
        ]
        distinct = set(got)
        expected = set(range(1, total + 1))
        report = {
            "received": len(got),
            "distinct": len(distinct),
            "lost": len(expected - distinct),
            "doubled": len(got) - len(distinct),
            "in_order": got == sorted(got),
        }
        print(json.dumps(report))
        return 0 if distinct == expected and len(got) == total and report["in_order"] else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
