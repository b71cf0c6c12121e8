"""The sharded GRPO update: one jitted step over a (data, fsdp, tensor) mesh, compiled once per batch shape.

Each of `micro_batches` slices (a `lax.scan`) adds its loss sum, denominator and gradient of the sum to running
totals, divided by the total denominator after the last slice, so any number of micro-batches gives the one-batch
gradient; then global-norm clipping and AdamW (optim.py). Only completion positions reach the output head
(rl/head.py). The old logprobs are stop_gradient(logp) of this forward with one update per batch, else
`batch.old_logprobs`. With LoRA (`lora`, rl/lora.py) the trained params are the adapters: the targets are merged
once per step, the gradient is taken with respect to the merged targets and pulled back to the adapters once after
the last slice, and the frozen base (`TrainState.frozen`) is neither donated nor updated. CoCA's distillation
term (distill targets in the batch) and HarnessBandit's gradient sketch (`sketch_spec`) are optional; without them
the step compiles as before:

    objective = (pg_sum + lambda_D * KL_sum * D_pg / D_kl) / D_pg = L_GRPO + lambda_D * sum KL_t / D_kl

The trained params and optimiser state are donated: the caller must not touch the old state after a step.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from harnessrl_jax.models import ModelConfig, Params, features, forward, param_shapes
from harnessrl_jax.models.llama import split_layers, stack_layers
from harnessrl_jax.models.sharding import BATCH_SPEC, partition_specs
from harnessrl_jax.rl import distill, grpo, lora as lora_lib
from harnessrl_jax.rl.batch import TrainBatch
from harnessrl_jax.rl.head import gathered_logprobs
from harnessrl_jax.rl.sketch import sketch

# The fold of the run's key the adapters are drawn from: a step count no run reaches (step k draws from fold k).
LORA_KEY = 2**31 - 1


class TrainState(NamedTuple):
    """Everything the update changes, checkpointed together, and under LoRA the frozen base it adapts."""

    params: Params  # float32 master weights: the whole policy, or under LoRA its adapters
    opt_state: Any
    step: jax.Array  # int32 []: optimiser updates applied so far
    rng: jax.Array  # uint32 [2]: the run's root key; step k draws from fold_in(rng, k)
    # Under LoRA the base params (float32, never updated); never checkpointed: a restored state takes them from the
    # config's weights again (Trainer.with_base). None without LoRA.
    frozen: Params | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class LossConfig:
    """config.loss: the registered loss (grpo.LOSS_FNS) and its arguments (grpo.policy_loss's keywords)."""

    name: str = "grpo"
    clip_low: float = 0.2
    clip_high: float = 0.2
    kl_coef: float = 0.001
    agg: str = "token-mean"  # grpo.AGG_MODES
    tis_cap: float = 0.0  # truncated importance sampling cap of the engine-vs-trainer ratio; 0: off
    log_ratio_clip: float = 20.0

    def __post_init__(self):
        if self.name not in grpo.LOSS_FNS:
            raise ValueError(f"name={self.name!r}: known losses {sorted(grpo.LOSS_FNS)}")
        if self.agg not in grpo.AGG_MODES:
            raise ValueError(f"agg={self.agg!r}: expected one of {', '.join(grpo.AGG_MODES)}")
        if self.tis_cap is not None and self.tis_cap < 0:
            raise ValueError(f"tis_cap={self.tis_cap}: must be >= 0 (0: off)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class LossSettings(LossConfig):
    """What the train step computes its loss with: config.loss, the sampling temperature and the method's terms."""

    temperature: float = 1.0  # logprobs are of softmax(logits / T), the distribution the engine sampled from
    # lambda_D of CoCA's self-distillation term, applied when a batch carries distill targets (rl/distill.py)
    distill_coef: float = 1.0


def _is_spec(x):
    return isinstance(x, P)


class Trainer:
    """Builds, places and runs the sharded train step for one model, optimiser, mesh and loss."""

    def __init__(self, model_config: ModelConfig, optimizer: optax.GradientTransformation, mesh: Mesh,
                 loss: LossSettings = LossSettings(), *, schedule: optax.Schedule | None = None,
                 micro_batches: int = 1, sketch_spec=None, completion_len: int | None = None,
                 head_tokens: int = 512, lora: lora_lib.Lora | None = None):
        if model_config.param_dtype != "float32":
            # Master weights stay float32; compute_dtype chooses the precision of the matmuls.
            model_config = model_config.replace(param_dtype="float32")
        self.model_config = model_config
        self.optimizer = optimizer
        self.schedule = schedule
        self.mesh = mesh
        self.loss = loss
        self.micro_batches = int(micro_batches)
        # positions per row the loss reads (from each row's first loss position); None: all of them
        self.completion_len = None if completion_len is None else int(completion_len)
        if self.completion_len is not None and self.completion_len < 1:
            raise ValueError(f"completion_len must be >= 1, got {completion_len}")
        self.head_tokens = int(head_tokens)  # positions per device in one chunk of the output head (rl/head.py)
        self.loss_fn = grpo.get_loss_fn(loss.name)
        self.param_specs = partition_specs(model_config, mesh)
        self.param_shardings = self._named(self.param_specs)
        # what the optimiser trains: the params, or under LoRA the adapters
        self.lora = lora
        if lora is None:
            self.trained_shapes, self.trained_specs = param_shapes(model_config), self.param_specs
        else:
            if sketch_spec is not None:
                raise ValueError("a gradient sketch (HarnessBandit) reads the full-parameter gradient; it does not "
                                 "run with LoRA (model.lora_rank > 0)")
            self.trained_shapes = lora_lib.adapter_shapes(lora, param_shapes(model_config))
            self.trained_specs = lora_lib.adapter_specs(lora, self.param_specs, param_shapes(model_config))
        self._merge = None
        self.replicated = NamedSharding(mesh, P())
        self.batch_sharding = NamedSharding(mesh, BATCH_SPEC)
        self.data_parallel = mesh.shape["data"] * mesh.shape["fsdp"]
        self._init = self._logprobs = None
        # HarnessBandit's gradient sketch (rl.sketch): one more, replicated output of the same step; None: the step
        # compiles exactly as without it.
        self.sketch_spec = sketch_spec
        outs = (self.state_shardings(), self.replicated) + ((self.replicated,) if sketch_spec is not None else ())
        self._step = jax.jit(self._train_step, donate_argnums=0, out_shardings=outs)

    # ------------------------------------------------------------------------------------------ placement

    def _named(self, specs):
        return jax.tree.map(lambda s: NamedSharding(self.mesh, s), specs, is_leaf=_is_spec)

    def state_shardings(self) -> TrainState:
        """NamedShardings of the train state: optimiser moments shard like the params they follow."""
        trained = self._named(self.trained_specs)
        opt_shape = jax.eval_shape(self.optimizer.init, self._abstract(self.trained_shapes, trained))
        opt_specs = optax.tree_utils.tree_map_params(
            self.optimizer, lambda _, spec: spec, opt_shape, self.trained_specs,
            transform_non_params=lambda _: P(), is_leaf=_is_spec)
        return TrainState(trained, self._named(opt_specs), self.replicated, self.replicated)

    @staticmethod
    def _abstract(shapes, shardings):
        return jax.tree.map(lambda shape, sh: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=sh), shapes,
                            shardings, is_leaf=lambda x: isinstance(x, tuple))

    def abstract_params(self) -> Params:
        """ShapeDtypeStructs (with shardings) of the float32 params (under LoRA: of the base)."""
        return self._abstract(param_shapes(self.model_config), self.param_shardings)

    def abstract_state(self) -> TrainState:
        """ShapeDtypeStructs with shardings of the checkpointed train state (no frozen base): the restore target of
        a checkpoint."""
        shardings = self.state_shardings()
        shapes = jax.eval_shape(self._init_fn, self.abstract_params(), jax.ShapeDtypeStruct((2,), jnp.uint32))
        return jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), shapes, shardings)

    def _init_fn(self, params, rng):
        if self.lora is None:
            params = jax.tree.map(lambda p: p.astype(jnp.float32), params)
        else:  # the adapters of params
            params = lora_lib.init_adapters(self.lora, params, jax.random.fold_in(rng, LORA_KEY))
        return TrainState(params, self.optimizer.init(params), jnp.zeros((), jnp.int32), rng)

    def init_state(self, params: Params, rng: jax.Array) -> TrainState:
        """A fresh train state: float32 copies of `params` placed on the mesh, optimiser state zeroed; under LoRA
        `params` is the frozen base and fresh adapters are trained."""
        if self._init is None:
            self._init = jax.jit(self._init_fn, out_shardings=self.state_shardings())
        placed = self.place_params(params)
        state = self._init(placed, jnp.asarray(rng, jnp.uint32))
        return state if self.lora is None else state._replace(frozen=placed)

    def with_base(self, state: TrainState, params: Params) -> TrainState:
        """A restored state with its frozen base placed from `params` (the config's weights); without LoRA, the
        state as it is."""
        return state if self.lora is None else state._replace(frozen=self.place_params(params))

    def policy_params(self, state: TrainState) -> Params:
        """The params the policy samples, is evaluated and exported with: the trained params, or under LoRA the
        base with the adapters merged (one jitted merge; the untargeted leaves are the base's arrays)."""
        if self.lora is None:
            return state.params
        if self._merge is None:
            view_shardings = lora_lib.partition(self.lora, self.param_shardings)[0]
            self._merge = jax.jit(functools.partial(lora_lib.merge, self.lora), out_shardings=view_shardings)
        view, rest = lora_lib.partition(self.lora, state.frozen)
        return lora_lib.combine(self._merge(view, state.params), rest)

    def place_params(self, params: Params) -> Params:
        """`params` as float32 global arrays with the model's shardings (a copy: safe from donation)."""
        def place(p, sharding):
            host = np.asarray(p, np.float32)
            return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])

        return jax.tree.map(place, params, self.param_shardings)

    def put_batch(self, batch: TrainBatch) -> TrainBatch:
        """Global arrays of a host batch (every process passes the same full batch), rows sharded over data+fsdp."""
        rows = batch.num_rows
        if rows % (self.micro_batches * self.data_parallel):
            raise ValueError(f"batch rows ({rows}) must be a multiple of micro_batches ({self.micro_batches}) x "
                             f"data-parallel devices ({self.data_parallel})")
        self._check_window(batch)
        return TrainBatch(*(x if x is None or isinstance(x, jax.Array) else  # already placed (teacher_topk)
                            jax.make_array_from_callback(x.shape, self.batch_sharding, lambda idx, x=x: x[idx])
                            for x in batch))

    def _check_window(self, batch: TrainBatch) -> None:
        """A host batch's loss (and distillation) positions must fit in each row's window of completion_len."""
        if self.completion_len is None:
            return
        masks = [m for m in (batch.loss_mask, batch.distill_mask) if m is not None and not isinstance(m, jax.Array)]
        if not masks:
            return
        mask = np.logical_or.reduce([np.asarray(m, bool) for m in masks])
        any_pos = mask.any(axis=1)
        first = mask.argmax(axis=1)
        last = mask.shape[1] - 1 - mask[:, ::-1].argmax(axis=1)
        span = np.where(any_pos, last - first + 1, 0)
        if span.max(initial=0) > self.completion_len:
            row = int(span.argmax())
            raise ValueError(f"batch row {row}: its loss positions span {int(span[row])} tokens, more than the "
                             f"trainer's completion_len ({self.completion_len}, the sampler's max_new_tokens); "
                             "raise max_new_tokens or build the Trainer with a larger completion_len")

    # ------------------------------------------------------------------------------------------------ step

    def step(self, state: TrainState, batch: TrainBatch, ref_params: Params | None = None, *,
             return_sketch: bool = False):
        """One update: (new state, metrics as replicated scalars), and the gradient sketch [d] (replicated) when
        `return_sketch` (the trainer needs a sketch_spec). `state` is donated but for its frozen base; batch from
        put_batch. Under LoRA the reference policy defaults to the frozen base."""
        if self.loss.kl_coef and ref_params is None and self.lora is None:
            raise ValueError("kl_coef > 0 needs ref_params (the frozen reference policy)")
        if return_sketch and self.sketch_spec is None:
            raise ValueError("return_sketch needs a Trainer built with a sketch_spec")
        if self.lora is not None and state.frozen is None:
            raise ValueError("a LoRA train state needs its frozen base: Trainer.with_base(state, params) after a "
                             "restore")
        out = self._step(state._replace(frozen=None), batch, ref_params if self.loss.kl_coef else None,
                         state.frozen)
        out = (out[0]._replace(frozen=state.frozen), *out[1:])
        return out if return_sketch or self.sketch_spec is None else out[:2]

    def compiles(self) -> int:
        """How many versions of the step have been compiled (1 in a healthy run)."""
        return self._step._cache_size()

    def _constrain(self, x: jax.Array, kind: str) -> jax.Array:
        """Activations stay sharded by batch rows over (data, fsdp), the logits' vocabulary over tensor where it
        divides, the output head's gradient as the head: without this the partitioner may gather a micro-batch's
        activations onto every device instead of gathering each layer's FSDP-sharded weights (launch/plan.py
        measures the difference)."""
        if kind == "head":  # the output head's gradient, accumulated over chunks (rl/head.py): as the head itself
            return jax.lax.with_sharding_constraint(
                x, self.param_shardings["embed" if self.model_config.tie_embeddings else "lm_head"])
        vocab = "tensor" if kind == "logits" and x.shape[-1] % self.mesh.shape["tensor"] == 0 else None
        spec = P(*BATCH_SPEC, *([None] * (x.ndim - 2)), vocab)
        return jax.lax.with_sharding_constraint(x, NamedSharding(self.mesh, spec))

    def _window(self, mb: TrainBatch):
        """(index [b, W], valid [b, W]): each row's completion_len positions from its first loss (or distillation)
        position, clipped to the row; None when the window would be the whole row."""
        length = mb.tokens.shape[1]
        if self.completion_len is None or self.completion_len >= length:
            return None
        mask = mb.loss_mask if mb.distill_mask is None else mb.loss_mask | mb.distill_mask
        index = jnp.argmax(mask, axis=1)[:, None] + jnp.arange(self.completion_len)
        return jnp.minimum(index, length - 1), index < length

    @staticmethod
    def _at(x, window):
        """x [b, T, ...] at the window's positions: [b, W, ...]."""
        if window is None:
            return x
        index = window[0].reshape(window[0].shape + (1,) * (x.ndim - 2))
        return jnp.take_along_axis(x, index, axis=1)

    def _windowed(self, mb: TrainBatch, window) -> TrainBatch:
        """The per-position fields of a micro-batch at the window (masks off where the window leaves the row);
        tokens and attention_mask stay whole, for the layers."""
        if window is None:
            return mb
        at = functools.partial(self._at, window=window)
        return mb._replace(
            targets=at(mb.targets), loss_mask=at(mb.loss_mask) & window[1], engine_logprobs=at(mb.engine_logprobs),
            old_logprobs=None if mb.old_logprobs is None else at(mb.old_logprobs),
            distill_ids=None if mb.distill_ids is None else at(mb.distill_ids),
            distill_logp=None if mb.distill_logp is None else at(mb.distill_logp),
            distill_mask=None if mb.distill_mask is None else at(mb.distill_mask) & window[1])

    def _head(self, params: Params, tokens, attention_mask, window, ids):
        """(logprobs [b, W, K] of ids [b, W, K], entropy [b, W]) at the loss temperature, at the window."""
        x, head = features(self.model_config, params, tokens, attention_mask, constrain=self._constrain)
        if head is None:  # a module policy: x is already the logits [b, T, V]
            z = self._at(x, window) / self.loss.temperature
            logp = jax.nn.log_softmax(z, axis=-1)
            entropy = -jnp.sum(jnp.exp(logp) * logp, axis=-1)
            return jnp.take_along_axis(logp, ids, axis=-1), entropy
        rows = max(1, x.shape[0] // self.data_parallel)
        return gathered_logprobs(self._at(x, window), head, ids, temperature=self.loss.temperature,
                                 vocab_axis=0 if self.model_config.tie_embeddings else 1,
                                 chunk=max(1, self.head_tokens // rows), constrain=self._constrain)

    def sequence_logprobs(self, params: Params, tokens, attention_mask, targets) -> jax.Array:
        """Float32 logprobs [B, T] of targets under params, at the loss temperature: the trainer's view."""
        return self._head(params, tokens, attention_mask, None, targets[..., None])[0][..., 0]

    def logprobs(self, params: Params, batch: TrainBatch) -> jax.Array:
        """Sharded logprobs [B, T] of batch.targets under params (e.g. the old policy before several updates),
        one micro-batch at a time; 0 off the loss mask."""
        if self._logprobs is None:
            def fn(params, batch):
                def one(mb):  # at the window, put back at the row's positions (0 elsewhere)
                    window = self._window(mb)
                    w = self._windowed(mb, window)
                    logp = self._head(params, mb.tokens, mb.attention_mask, window, w.targets[..., None])[0][..., 0]
                    if window is None:
                        return logp
                    rows = jnp.arange(logp.shape[0])[:, None]
                    return jnp.zeros(mb.targets.shape, jnp.float32).at[rows, window[0]].add(
                        jnp.where(window[1], logp, 0.0))
                if self.micro_batches == 1:
                    out = one(batch)
                else:  # [M, B/M, T] back to [B, T] in the row order _split took them
                    out = jax.lax.map(one, self._split(batch._replace(old_logprobs=None)))
                    out = out.swapaxes(0, 1).reshape(batch.tokens.shape)
                return jnp.where(batch.loss_mask, out, 0.0)
            self._logprobs = jax.jit(fn, out_shardings=self.batch_sharding)
        return self._logprobs(params, batch._replace(old_logprobs=None))

    def _microbatch_loss(self, params, ref_params, mb: TrainBatch, totals=None):
        """(loss_sum, (denominator, metric sums)) of one micro-batch; differentiated w.r.t. params."""
        s = self.loss
        window = self._window(mb)
        w = self._windowed(mb, window)
        ids = w.targets[..., None]
        if w.distill_mask is not None:  # the student's logprobs at the teacher's top-k ids, from the same pass
            ids = jnp.concatenate([ids, w.distill_ids], axis=-1)
        logp_k, entropy = self._head(params, mb.tokens, mb.attention_mask, window, ids)
        logp = logp_k[..., 0]
        ref_logp = None
        if ref_params is not None:
            ref_logp = jax.lax.stop_gradient(
                self._head(ref_params, mb.tokens, mb.attention_mask, window, w.targets[..., None])[0][..., 0])
        old_logp = jax.lax.stop_gradient(logp) if w.old_logprobs is None else w.old_logprobs
        loss_sum, denominator, metrics = self.loss_fn(
            logp, old_logp, ref_logp, w.advantages, w.loss_mask, w.weights,
            clip_low=s.clip_low, clip_high=s.clip_high, kl_coef=s.kl_coef, agg=s.agg,
            log_ratio_clip=s.log_ratio_clip, tis_cap=s.tis_cap or None, engine_logp=w.engine_logprobs)
        counted = w.loss_mask & jnp.isfinite(w.advantages)[:, None]
        metrics["entropy_sum"] = jnp.where(counted, jax.lax.stop_gradient(entropy), 0.0).sum()
        if w.distill_mask is not None:
            loss_sum = loss_sum + self._distill_term(logp_k[..., 1:], w, metrics, totals)
        return loss_sum, (denominator, metrics)

    def _distill_term(self, student_logp, mb: TrainBatch, metrics, totals):
        """lambda_D * KL_sum(micro-batch) * D_pg / D_kl, so that after the step's division by the GRPO denominator
        D_pg the objective is L_GRPO + lambda_D * (sum KL_t) / D_kl, each term with its own normaliser; both
        `totals` are over the whole batch (_batch_totals), so micro-batches stay exact."""
        kl_sum, kl_tokens = distill.kl_sum_from_logps(mb.distill_logp, student_logp, mb.distill_mask)
        pg_den, kl_den = totals
        metrics["distill_kl_total"], metrics["distill_tokens"] = jax.lax.stop_gradient(kl_sum), kl_tokens
        return self.loss.distill_coef * kl_sum * jnp.maximum(pg_den, 1.0) / jnp.maximum(kl_den, 1.0)

    def _batch_totals(self, batch: TrainBatch):
        """(GRPO denominator, distilled tokens) of the whole batch: the loss's denominator depends only on the
        masks and advantages, so it is read from the loss on zero logprobs, before any forward."""
        zeros = jnp.zeros(batch.loss_mask.shape, jnp.float32)
        s = self.loss
        _, pg_den, _ = self.loss_fn(zeros, zeros, None, batch.advantages, batch.loss_mask, batch.weights,
                                    clip_low=s.clip_low, clip_high=s.clip_high, kl_coef=0.0, agg=s.agg)
        return pg_den, jnp.sum(batch.distill_mask).astype(jnp.float32)

    def teacher_topk(self, params: Params, tokens, attention_mask, positions, rows, *, k: int, num_rows: int):
        """CoCA's teacher, before the update: the top-k (ids [B, T, k] int32, log-probabilities float32) of
        softmax(logits / T) of `params` (no gradient) over teacher sequences [D, T_T], taken at teacher
        `positions` [D, T] (the teacher position aligned with each student position) and placed at batch rows
        `rows` [D] (-1: a padding teacher row) of a [num_rows, T, k] batch, sharded like the batch; nothing goes
        to the host. One micro-batch of teacher rows at a time, as the step; compiled once per shape."""
        if getattr(self, "_teacher", None) is None:
            self._teacher = {}
        if (k, num_rows) not in self._teacher:
            def fn(params, tokens, attention_mask, positions, rows):
                def one(x):
                    t, a, pos = x
                    logits = forward(self.model_config, params, t, a, constrain=self._constrain)
                    ids, logp = distill.teacher_topk(logits, k=k, temperature=self.loss.temperature)
                    return (jnp.take_along_axis(ids, pos[..., None], axis=1),
                            jnp.take_along_axis(logp, pos[..., None], axis=1))

                m = self.micro_batches
                if m == 1 or tokens.shape[0] % (m * self.data_parallel):
                    ids, logp = one((tokens, attention_mask, positions))
                else:  # [M, D/M, ...] rows m, m+M, ... as _split takes them, then back in row order
                    split = lambda x: x.reshape(x.shape[0] // m, m, *x.shape[1:]).swapaxes(0, 1)  # noqa: E731
                    ids, logp = jax.lax.map(one, (split(tokens), split(attention_mask), split(positions)))
                    ids, logp = (x.swapaxes(0, 1).reshape(tokens.shape[0], *x.shape[2:]) for x in (ids, logp))
                shape = (num_rows, positions.shape[1], k)
                rows = jnp.where(rows < 0, num_rows, rows)  # out of range: dropped
                return (jnp.zeros(shape, jnp.int32).at[rows].set(ids, mode="drop"),
                        jnp.zeros(shape, jnp.float32).at[rows].set(logp, mode="drop"))
            self._teacher[(k, num_rows)] = jax.jit(fn, out_shardings=(self.batch_sharding, self.batch_sharding))

        def put(x):
            return jax.make_array_from_callback(x.shape, self.batch_sharding, lambda idx: x[idx])
        return self._teacher[(k, num_rows)](params, put(np.asarray(tokens, np.int32)),
                                            put(np.asarray(attention_mask, bool)),
                                            put(np.asarray(positions, np.int32)), put(np.asarray(rows, np.int32)))

    def _split(self, batch: TrainBatch) -> TrainBatch:
        """[B, ...] -> [M, B/M, ...] taking rows m, m+M, ...: each device keeps its own rows (no resharding)."""
        m = self.micro_batches

        def split(x):
            x = x.reshape(x.shape[0] // m, m, *x.shape[1:]).swapaxes(0, 1)
            return jax.lax.with_sharding_constraint(x, NamedSharding(self.mesh, P(None, *BATCH_SPEC)))

        return jax.tree.map(split, batch)

    def _train_step(self, state: TrainState, batch: TrainBatch, ref_params, frozen=None):
        loss_fn = self._microbatch_loss
        if batch.distill_mask is not None:
            loss_fn = functools.partial(loss_fn, totals=self._batch_totals(batch))
        params = state.params
        unrolled = not self.model_config.scan_layers
        split = lambda tree: split_layers(tree) if "layers" in tree else tree  # noqa: E731
        if self.lora is not None:  # differentiated: the merged targets; the rest of the base is a constant
            if ref_params is None and self.loss.kl_coef:
                ref_params = frozen
            view, rest = lora_lib.partition(self.lora, frozen)
            params, pull_back = jax.vjp(functools.partial(lora_lib.merge, self.lora, view), state.params)
            rest = split(rest) if unrolled else rest
            full_loss = loss_fn
            loss_fn = lambda p, *a: full_loss(lora_lib.combine(p, rest), *a)  # noqa: E731
        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
        if unrolled:  # the layers sliced out of the stack once per step, not once per micro-batch and pass
            params = split(params)
            ref_params = None if ref_params is None else split_layers(ref_params)
        if self.micro_batches == 1:
            (loss_sum, (denominator, sums)), grads = grad_fn(params, ref_params, batch)
        else:
            def accumulate(carry, mb):
                grads, loss_sum, denominator, sums = carry
                (l, (d, s)), g = grad_fn(params, ref_params, mb)
                return (jax.tree.map(jnp.add, grads, g), loss_sum + l, denominator + d,
                        grpo.merge_metrics(sums, s)), None

            mbs = self._split(batch)
            first = jax.tree.map(lambda x: x[0], mbs)
            _, (_, sums_shape) = jax.eval_shape(loss_fn, params, ref_params, first)
            zeros = (jax.tree.map(jnp.zeros_like, params), jnp.zeros((), jnp.float32),
                     jnp.zeros((), jnp.float32), jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), sums_shape))
            (grads, loss_sum, denominator, sums), _ = jax.lax.scan(accumulate, zeros, mbs)
        if unrolled and "layers" in grads:
            grads = stack_layers(grads)
        if self.lora is not None:
            (grads,) = pull_back(grads)

        # The objective is sum(loss_sum) / sum(denominator): exact for any split of the batch.
        scale = 1.0 / jnp.maximum(denominator, 1.0)
        grads = jax.tree.map(lambda g: g * scale, grads)
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)

        if "distill_tokens" in sums:  # the distillation term's mean KL per distilled token
            sums = dict(sums)
            sums["distill_kl"] = sums.pop("distill_kl_total") / jnp.maximum(sums["distill_tokens"], 1.0)
        metrics = grpo.finalize_metrics(sums)
        metrics.update(
            loss=loss_sum * scale,
            denominator=denominator,
            grad_norm=optax.tree.norm(grads),  # before clipping
            update_norm=optax.tree.norm(updates),
            param_norm=optax.tree.norm(params),
        )
        if self.schedule is not None:
            metrics["lr"] = jnp.asarray(self.schedule(state.step), jnp.float32)
        new_state = TrainState(params, opt_state, state.step + 1, state.rng)
        if self.sketch_spec is not None:  # the optimiser's gradient, before clipping (which only rescales it)
            return new_state, metrics, sketch(grads, self.sketch_spec)
        return new_state, metrics


def to_host(tree):
    """Replicated global arrays (step metrics, the step counter, the key) as numpy, also across processes."""
    def one(x):
        if not isinstance(x, jax.Array):
            return x
        if not x.sharding.is_fully_replicated:
            raise ValueError(f"to_host takes replicated arrays; this one is sharded as {x.sharding}")
        return np.asarray(x.addressable_shards[0].data)
    return jax.tree.map(one, tree)


def metrics_to_host(metrics) -> dict[str, float]:
    """Step metrics as plain floats (a device-to-host copy; call once per step)."""
    return {k: float(v) for k, v in to_host(metrics).items()}
