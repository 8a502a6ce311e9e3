"""The accuracy of POST /detect on Multi30k test2016 (the table of docs/serving.md): each sentence of en, de,
fr and cs identified as a server of those four languages identifies it.

    python -m benchmarks.detect_bench --data DIR  # DIR: test2016.{en,de,fr,cs}
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from nmt.serve.detect import detected

LANGUAGES = ("cs", "de", "en", "fr")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the folder of test2016.{en,de,fr,cs}")
    parser.add_argument("--split", default="test2016")
    args = parser.parse_args()
    right = total = 0
    print("| language | sentences | correct | taken for |\n|---|---:|---:|---|")
    for language in LANGUAGES:
        lines = (args.data / f"{args.split}.{language}").read_text(encoding="utf-8").splitlines()
        found = Counter(detected(line, LANGUAGES).language for line in lines)
        wrong = ", ".join(f"{other} {count}" for other, count in found.most_common() if other != language)
        print(f"| {language} | {len(lines)} | {100 * found[language] / len(lines):.2f}% | {wrong or '-'} |")
        right, total = right + found[language], total + len(lines)
    print(f"| all | {total} | {100 * right / total:.2f}% | |")


if __name__ == "__main__":
    main()
