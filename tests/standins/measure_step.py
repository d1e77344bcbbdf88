"""Not a stand-in: an ms-swift `--external_plugins` file that measures the real trainers. It wraps the
compute_loss of GRPOTrainer (`swift rlhf`) and of Seq2SeqTrainer (`swift sft`), and accelerate's backward, in
grpo_recipes.memory.trace.LiveBytes (the counter `grpo-guard trace` uses, here on real CPU tensors) and appends, per
training micro-batch, the step's peak of newly allocated bytes, the input shape and the number of positions whose
logits were kept (GRPO: the completion length; SFT: ms-swift's logits_to_keep) to $GRPO_MEASURE_OUT (JSON lines)."""

import json
import os

from swift.rlhf_trainers.grpo_trainer import GRPOTrainer
from swift.trainers.seq2seq_trainer import Seq2SeqTrainer

from grpo_recipes.memory.trace import LiveBytes


def _shape_grpo(inputs):
    batch = inputs[0] if isinstance(inputs, list) else inputs
    return list(batch['model_inputs']['input_ids'].shape), int(batch['grpo_batch'].logits_to_keep)


def _shape_sft(inputs):
    keep = inputs.get('logits_to_keep')
    keep = int(keep.sum()) if hasattr(keep, 'sum') else int(keep or inputs['input_ids'].shape[1])
    return list(inputs['input_ids'].shape), keep


def _measured(trainer_cls, shape_of):
    original_compute_loss = trainer_cls.compute_loss

    def compute_loss(self, model, inputs, *args, **kwargs):
        if not model.training:
            return original_compute_loss(self, model, inputs, *args, **kwargs)
        shape, kept = shape_of(inputs)  # before compute_loss pops what it consumes
        counter = LiveBytes()
        counter.stage = 'forward'
        counter.mode.__enter__()
        try:
            loss = original_compute_loss(self, model, inputs, *args, **kwargs)
        except BaseException:
            counter.mode.__exit__(None, None, None)
            raise
        self._grpo_measure = (counter, shape, kept)
        if not getattr(self.accelerator, '_grpo_measure_wrapped', False):
            original = self.accelerator.backward

            def backward(loss, **kw):
                try:
                    self._grpo_measure[0].stage = 'backward'
                    return original(loss, **kw)
                finally:
                    c, shp, kept_now = self._grpo_measure
                    c.mode.__exit__(None, None, None)
                    with open(os.environ['GRPO_MEASURE_OUT'], 'a') as f:
                        f.write(
                            json.dumps(
                                {'peak_bytes': c.peak, 'peak_at': c.peak_at, 'shape': shp, 'completion': kept_now}
                            )
                            + '\n'
                        )

            self.accelerator.backward = backward
            self.accelerator._grpo_measure_wrapped = True
        return loss

    trainer_cls.compute_loss = compute_loss


_measured(GRPOTrainer, _shape_grpo)
_measured(Seq2SeqTrainer, _shape_sft)
