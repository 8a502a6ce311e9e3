"""The accuracy of POST /detect on Multi30k test2016 (the table of docs/serving.md): each sentence of en, de,
fr and cs identified as a server of those four languages identifies it.

    python -m benchmarks.detect_bench --data DIR  # DIR: test2016.{en,de,fr,cs}
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from benchmarks.common import parser, table
from nmt.serve.detect import detected

LANGUAGES = ("cs", "de", "en", "fr")


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("--data", type=Path, required=True, help="the folder of test2016.{en,de,fr,cs}")
    args = parse.parse_args()
    rows, right, total = [], 0, 0
    for language in LANGUAGES:
        lines = (args.data / f"test2016.{language}").read_text(encoding="utf-8").splitlines()
        found = Counter(detected(line, LANGUAGES).language for line in lines)
        wrong = ", ".join(f"{other} {count}" for other, count in found.most_common() if other != language)
        rows.append([language, len(lines), f"{100 * found[language] / len(lines):.2f}%", wrong or "-"])
        right, total = right + found[language], total + len(lines)
    rows.append(["all", total, f"{100 * right / total:.2f}%", ""])
    print(table(["language", "sentences", "correct", "taken for"], rows))


if __name__ == "__main__":
    main()
