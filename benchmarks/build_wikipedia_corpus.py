"""Build the shipped Wikipedia paragraph corpus from the dump excerpt inside gensim.

Run once by a maintainer (never at run time): ``pip install gensim`` (4.4.0 was used),
then ``python benchmarks/build_wikipedia_corpus.py``. It reads
``gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-
shortened.bz2`` (206 pages of the English Wikipedia, dump of April 2016, shipped in
gensim's wheel), keeps the 107 articles (main namespace, no redirects), strips the
markup with gensim's ``filter_wiki``, cuts every article into paragraphs (blank
lines), tokenizes (lower-case runs of ``a-z`` of 3 or more letters, scikit-learn's
English stop words removed), keeps the paragraphs of at least ``MIN_TOKENS`` tokens
and the words in at least ``MIN_DF`` of them and at most ``MAX_DF`` of them, and
writes ``bayespmf/datasets/data/wikipedia/``:

- ``docword.txt.gz``: the counts in the UCI bag-of-words format (three header lines
  ``D``, ``W``, ``NNZ``, then ``docID wordID count``, 1-based), ``gzip -n -9``;
- ``vocab.txt``: the words, one per line (``wordID`` order);
- ``documents.tsv``: per document its article title, page id and paragraph number;
- checksums (sha256 of the uncompressed bytes) printed for the registry.

The text is Wikipedia's, CC BY-SA 3.0 (see ``LICENSE.txt`` there): the derived
counts are shared under the same licence.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import re
from pathlib import Path

MIN_TOKENS = 30
MIN_DF = 5
MAX_DF = 0.4

OUT = Path(__file__).resolve().parents[1] / "bayespmf" / "datasets" / "data" / "wikipedia"


def main() -> None:
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki
    from gensim.test.utils import datapath
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer

    path = datapath("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
    pages = extract_pages(bz2.open(path), filter_namespaces=("0",))
    docs, meta = [], []
    for title, text, pageid in pages:
        if text.lstrip().lower().startswith("#redirect"):
            continue
        for number, para in enumerate(re.split(r"\n\s*\n", filter_wiki(text))):
            words = re.findall(r"[a-z]{3,}", para.lower())
            tokens = [t for t in words if t not in ENGLISH_STOP_WORDS]
            if len(tokens) >= MIN_TOKENS:
                docs.append(" ".join(tokens))
                meta.append((title, pageid, number))
    vec = CountVectorizer(min_df=MIN_DF, max_df=MAX_DF, token_pattern=r"\S+")
    X = vec.fit_transform(docs).tocsr()
    keep = X.getnnz(axis=1) > 0
    X = X[keep]
    meta = [m for m, k in zip(meta, keep, strict=True) if k]
    X.sort_indices()
    vocab = vec.get_feature_names_out().tolist()
    coo = X.tocoo()
    lines = [f"{X.shape[0]}\n{X.shape[1]}\n{X.nnz}\n"]
    triples = zip(coo.row, coo.col, coo.data, strict=True)
    lines += [f"{r + 1} {c + 1} {v}\n" for r, c, v in triples]
    files = {
        "docword.txt": "".join(lines).encode(),
        "vocab.txt": "".join(w + "\n" for w in vocab).encode(),
        "documents.tsv": (
            "document\tarticle\tpage_id\tparagraph\n"
            + "".join(f"{i + 1}\t{t}\t{p}\t{n}\n" for i, (t, p, n) in enumerate(meta))
        ).encode(),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    for name, raw in files.items():
        print(name, hashlib.sha256(raw).hexdigest())
        if name == "docword.txt":
            (OUT / "docword.txt.gz").write_bytes(gzip.compress(raw, 9, mtime=0))
        else:
            (OUT / name).write_bytes(raw)
    print(
        f"{X.shape[0]} documents from {len({m[0] for m in meta})} articles, "
        f"{X.shape[1]} words, {X.nnz} nonzeros, {int(X.sum())} tokens"
    )


if __name__ == "__main__":
    main()
