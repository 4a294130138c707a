"""Keyed WordCount over any text file (Flink's WordCount example).

    rill run -p 2 -m rill.examples.word_count -- --input README.md --output out/word_count

Emits the running count of every word (a rolling reduce emits each update, as Flink's
streaming WordCount); the last line of a word in the output is its final count.
Words are maximal runs of letters, digits and underscores, lower-cased.
"""

from __future__ import annotations

import argparse
import re
from typing import Iterator, Tuple

from rill.common import Encoder
from rill.datastream import StreamExecutionEnvironment
from rill.datastream.connectors import BucketAssigner, FileSink, OutputFileConfig
from rill.examples.outputs import clear_earlier_parts

__all__ = ["split_words", "build_job", "main"]

_WORD = re.compile(r"\w+")


def split_words(line: str) -> Iterator[str]:
    return _WORD.findall(line.lower())


def count_one(word: str) -> Tuple[str, int]:
    return word, 1


def add_counts(a: Tuple[str, int], b: Tuple[str, int]) -> Tuple[str, int]:
    return a[0], a[1] + b[1]


def build_job(env: StreamExecutionEnvironment, input_path: str, output_path=None):
    counts = (env.read_text_file(input_path)
              .flat_map(split_words)
              .map(count_one)
              .key_by(lambda wc: wc[0])
              .reduce(add_counts))
    if output_path is None:
        counts.print()
    else:
        counts.sink_to(FileSink.for_row_format(output_path, Encoder.simple_string_encoder())
                       .with_output_file_config(OutputFileConfig("counts", ".txt"))
                       .with_bucket_assigner(BucketAssigner.base_path_bucket_assigner()).build())
    return counts


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Keyed WordCount")
    parser.add_argument("--input", required=True, help="a text file or a directory of text files")
    parser.add_argument("--output", help="output directory (default: print to stdout)")
    args = parser.parse_args(argv)
    env = StreamExecutionEnvironment.get_execution_environment()
    if args.output is not None:  # a second run replaces the first's counts
        clear_earlier_parts(args.output, "counts", ".txt")
    build_job(env, args.input, args.output)
    env.execute("WordCount")


if __name__ == "__main__":
    main()
