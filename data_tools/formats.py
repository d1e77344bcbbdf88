"""Read datasets in chunks and write kept rows back in the input's own format.

Formats: ``.jsonl`` (kept lines are written back byte for byte), ``.json`` (an array of objects),
``.csv``, ``.parquet`` (Arrow batches, schema kept), and a saved Hugging Face ``datasets`` dir.
Every writer writes to a temporary path beside the destination and renames it into place only when
the whole run succeeded (:class:`Atomic`), so an interrupted run leaves no partial output.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

BOM = b'\xef\xbb\xbf'


class InputError(ValueError):
    """The input as a whole cannot be read, or an option is wrong (named file, reason, fix): exit 2."""

    exit_code = 2


class DataError(InputError):
    """The data was read but cannot be used (no rows, no prompt column), or the output cannot be written: exit 1."""

    exit_code = 1


@dataclass
class Record:
    index: int
    """0-based row number among data rows."""
    line: int
    """1-based line number in the file (row number for non-line formats)."""
    row: Any = None
    raw: bytes | None = None
    """jsonl: the line exactly as read (with its line ending)."""
    error: str | None = None
    """Why the row could not be parsed (malformed)."""


def detect_format(path: Path) -> str:
    if path.is_dir():
        if (
            (path / 'dataset_info.json').is_file()
            or (path / 'state.json').is_file()
            or (path / 'dataset_dict.json').is_file()
        ):
            return 'hf'
        raise InputError(f'{path}: a directory but not a saved Hugging Face dataset (no dataset_info.json)')
    suffix = path.suffix.lower()
    if suffix in ('.jsonl', '.ndjson'):
        return 'jsonl'
    if suffix in ('.json', '.csv', '.parquet'):
        return suffix[1:]
    raise InputError(f'{path}: unknown format {suffix!r}; use .jsonl, .json, .csv, .parquet or a saved HF dataset dir')


def count_hint(path: Path, fmt: str) -> int | None:
    """Total bytes to read (for the progress bar), when known."""
    return path.stat().st_size if fmt in ('jsonl', 'csv', 'json') and path.is_file() else None


def read_chunks(path: Path, fmt: str, chunk_rows: int = 2048) -> Iterator[tuple[list[Record], int]]:
    """Yield (records, bytes consumed so far)."""
    reader = {'jsonl': _jsonl, 'json': _json, 'csv': _csv, 'parquet': _parquet, 'hf': _hf}[fmt]
    yield from reader(path, chunk_rows)


def _jsonl(path: Path, chunk_rows: int):
    chunk: list[Record] = []
    index = 0
    consumed = 0
    with open(path, 'rb') as f:
        for lineno, raw in enumerate(f, start=1):
            consumed += len(raw)
            body = raw[3:] if lineno == 1 and raw.startswith(BOM) else raw
            if lineno == 1 and body is not raw:
                raw = body  # drop the BOM: it is not part of the first row
            if not body.strip():
                continue  # blank lines hold no row (ms-swift's loader skips them too)
            rec = Record(index=index, line=lineno, raw=raw if raw.endswith(b'\n') else raw + b'\n')
            try:
                text = body.decode('utf-8')
            except UnicodeDecodeError as e:
                rec.error = f'invalid UTF-8 at byte {e.start} of the line'
            else:
                try:
                    rec.row = json.loads(text)
                except json.JSONDecodeError as e:
                    rec.error = f'invalid JSON: {e.msg} (column {e.colno})'
                except RecursionError:  # json's scanner recurses per level
                    rec.error = 'JSON nested too deeply to read (no dataset row nests more than a few levels)'
            chunk.append(rec)
            index += 1
            if len(chunk) >= chunk_rows:
                yield chunk, consumed
                chunk = []
    if chunk:
        yield chunk, consumed


def _json(path: Path, chunk_rows: int):
    try:
        with open(path, encoding='utf-8-sig') as f:
            data = json.load(f)
    except UnicodeDecodeError as e:
        raise InputError(f'{path}: not valid UTF-8 at byte {e.start}') from None
    except json.JSONDecodeError as e:
        raise InputError(f'{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}') from None
    except RecursionError:
        raise InputError(
            f'{path}: JSON nested too deeply to read; a .json dataset is an array of flat objects'
        ) from None
    if not isinstance(data, list):
        raise InputError(
            f'{path}: a .json dataset must be an array of objects (got {type(data).__name__}); '
            f'for one object per line use .jsonl'
        )
    size = path.stat().st_size
    for start in range(0, len(data), chunk_rows):
        part = data[start : start + chunk_rows]
        yield (
            [Record(index=start + i, line=start + i + 1, row=row) for i, row in enumerate(part)],
            size if start + chunk_rows >= len(data) else 0,
        )


def _csv(path: Path, chunk_rows: int):
    try:
        f = open(path, encoding='utf-8-sig', newline='')
        with f:
            reader = csv.DictReader(f)
            chunk: list[Record] = []
            index = 0
            for row in reader:
                rec = Record(index=index, line=reader.line_num, row=row)
                if None in row:
                    rec.error = f'{len(row[None])} more field(s) than the header'
                    rec.row = None
                chunk.append(rec)
                index += 1
                if len(chunk) >= chunk_rows:
                    yield chunk, f.buffer.tell() if hasattr(f, 'buffer') else 0
                    chunk = []
            if chunk:
                yield chunk, path.stat().st_size
    except UnicodeDecodeError as e:
        raise InputError(f'{path}: not valid UTF-8 at byte {e.start}; save the CSV as UTF-8') from None


def _parquet(path: Path, chunk_rows: int):
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises ArrowInvalid and friends
        raise InputError(f'{path}: not a readable parquet file ({e})') from None
    index = 0
    for batch in pf.iter_batches(batch_size=chunk_rows):
        rows = batch.to_pylist()
        yield [Record(index=index + i, line=index + i + 1, row=r) for i, r in enumerate(rows)], 0
        index += len(rows)


def _hf(path: Path, chunk_rows: int):
    ds = _load_hf(path)
    for start in range(0, len(ds), chunk_rows):
        rows = ds[start : start + chunk_rows]
        n = len(next(iter(rows.values()))) if rows else 0
        yield [Record(index=start + i, line=start + i + 1, row={k: v[i] for k, v in rows.items()}) for i in range(n)], 0


def _load_hf(path: Path):
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as e:
        raise InputError(f'{path}: cannot load the saved dataset ({e})') from None
    if isinstance(ds, datasets.DatasetDict):
        if len(ds) != 1:
            raise InputError(f'{path}: a DatasetDict with splits {list(ds)}; pass one split dir, e.g. {path}/train')
        ds = next(iter(ds.values()))
    return ds


# ------------------------------------------------------------------------------------------------
# Atomic output
# ------------------------------------------------------------------------------------------------


class Atomic:
    """A temporary path beside ``dest``; ``commit()`` renames it into place, ``discard()`` removes it."""

    def __init__(self, dest: Path, is_dir: bool = False):
        self.dest = dest
        parent = dest.parent if str(dest.parent) else Path('.')
        if not parent.is_dir():
            raise DataError(f'{dest}: cannot write: directory {parent} does not exist')
        try:
            if is_dir:
                self.tmp = Path(tempfile.mkdtemp(prefix=f'.{dest.name}.', suffix='.tmp', dir=parent))
            else:
                fd, name = tempfile.mkstemp(prefix=f'.{dest.name}.', suffix='.tmp', dir=parent)
                os.close(fd)
                self.tmp = Path(name)
        except OSError as e:
            raise DataError(f'{dest}: cannot write ({e.strerror})') from None
        self.is_dir = is_dir
        from .filemode import output_mode

        output_mode(self.tmp, dest, is_dir)  # mkstemp's 0600 -> the umask's mode (or the replaced file's)

    def commit(self) -> None:
        if self.is_dir and self.dest.exists():
            old = self.dest.with_name(f'.{self.dest.name}.old')
            shutil.rmtree(old, ignore_errors=True)
            os.replace(self.dest, old)
            os.replace(self.tmp, self.dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(self.tmp, self.dest)

    def discard(self) -> None:
        if self.is_dir:
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            try:
                self.tmp.unlink()
            except FileNotFoundError:
                pass


class Writer:
    """Writes kept records in the input's format to an :class:`Atomic` path."""

    def __init__(self, fmt: str, atomic: Atomic, source: Path):
        self.fmt, self.atomic, self.source = fmt, atomic, source
        self.count = 0
        self._first = True
        self._fh = None
        self._csv = None
        self._pq = None
        self._hf_indices: list[int] = []
        if fmt in ('jsonl', 'parquet'):
            self._fh = open(atomic.tmp, 'wb')
        elif fmt in ('json', 'csv'):
            self._fh = open(atomic.tmp, 'w', encoding='utf-8', newline='')
            if fmt == 'json':
                self._fh.write('[')

    def write(self, records: list[Record]) -> None:
        if not records:
            return
        self.count += len(records)
        if self.fmt == 'jsonl':
            self._fh.writelines(r.raw for r in records)
        elif self.fmt == 'json':
            for r in records:
                self._fh.write(('\n' if self._first else ',\n') + json.dumps(r.row, ensure_ascii=False))
                self._first = False
        elif self.fmt == 'csv':
            if self._csv is None:
                self._csv = csv.DictWriter(self._fh, fieldnames=list(records[0].row.keys()))
                self._csv.writeheader()
            self._csv.writerows(r.row for r in records)
        elif self.fmt == 'parquet':
            import pyarrow as pa
            import pyarrow.parquet as pq

            if self._pq is None:
                schema = pq.ParquetFile(self.source).schema_arrow
                self._pq = pq.ParquetWriter(self._fh, schema)
            self._pq.write_table(pa.Table.from_pylist([r.row for r in records], schema=self._pq.schema))
        elif self.fmt == 'hf':
            self._hf_indices.extend(r.index for r in records)

    def close(self) -> None:
        if self.fmt == 'json':
            self._fh.write('\n]\n' if not self._first else ']\n')
        if self.fmt == 'csv' and self._csv is None:
            with open(self.source, encoding='utf-8-sig', newline='') as f:
                header = next(csv.reader(f), [])
            csv.writer(self._fh).writerow(header)
        if self.fmt == 'parquet':
            import pyarrow.parquet as pq

            if self._pq is None:
                self._pq = pq.ParquetWriter(self._fh, pq.ParquetFile(self.source).schema_arrow)
            self._pq.close()
        if self._fh is not None:
            self._fh.close()
        if self.fmt == 'hf':
            ds = _load_hf(self.source).select(self._hf_indices)
            ds.save_to_disk(str(self.atomic.tmp))


class RejectsWriter:
    """JSON lines: one object per dropped or malformed row, with its line, reason and length."""

    def __init__(self, atomic: Atomic):
        self.atomic = atomic
        self._fh = open(atomic.tmp, 'w', encoding='utf-8')
        self.count = 0

    def write(self, rec: Record, reason: str, **extra) -> None:
        entry = {'line': rec.line, 'reason': reason, **extra}
        if rec.row is not None:
            entry['row'] = rec.row
        elif rec.raw is not None:
            entry['raw'] = rec.raw.decode('utf-8', errors='replace').rstrip('\r\n')
        self._fh.write(json.dumps(entry, ensure_ascii=False, default=str) + '\n')
        self.count += 1

    def close(self) -> None:
        self._fh.close()


def default_rejects_path(output: Path) -> Path:
    name = output.name
    for suffix in ('.jsonl', '.json', '.csv', '.parquet'):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return output.with_name(name + '.rejects.jsonl')
