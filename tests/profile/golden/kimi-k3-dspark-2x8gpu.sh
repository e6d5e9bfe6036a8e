env \
  SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0 \
  python3 -m sglang.launch_server \
  --model-path /models/Kimi-K3 \
  --trust-remote-code \
  --tool-call-parser kimi_k3 \
  --reasoning-parser kimi_k3 \
  --tp-size 16 \
  --ep-size 16 \
  --nnodes 2 \
  --node-rank 0 \
  --dist-init-addr rank0.example.internal:25000 \
  --host 0.0.0.0 \
  --port 8000 \
  --mem-fraction-static 0.85 \
  --max-running-requests 48 \
  --enable-metrics \
  --decode-log-interval 40 \
  --speculative-algorithm DSPARK \
  --speculative-draft-model-path /models/Kimi-K3-DSpark \
  --speculative-dspark-block-size 7 \
  --api-key "$(cat /run/secrets/specserve/api-key)" \
  --enable-linear-replayssm-spec \
  --moe-runner-backend marlin \
  --decode-attention-backend flashmla \
  --enable-symm-mem
