env \
  NCCL_ALGO=Ring \
  NCCL_BUFFSIZE=16777216 \
  NCCL_MAX_NCHANNELS=16 \
  NCCL_NTHREADS=512 \
  NCCL_P2P_LEVEL=SYS \
  NCCL_PROTO=LL \
  SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 \
  python3 -m sglang.launch_server \
  --model-path /models/Kimi-K2.5 \
  --trust-remote-code \
  --tool-call-parser kimi_k2 \
  --reasoning-parser kimi_k2 \
  --tp-size 8 \
  --host 127.0.0.1 \
  --port 8000 \
  --mem-fraction-static 0.85 \
  --max-running-requests 48 \
  --disable-custom-all-reduce \
  --enable-metrics \
  --decode-log-interval 40 \
  --speculative-algorithm EAGLE3 \
  --speculative-draft-model-path /models/kimi-k2.5-eagle3-mla \
  --speculative-num-steps 3 \
  --speculative-eagle-topk 1 \
  --speculative-num-draft-tokens 4 \
  --api-key "$(cat /run/secrets/specserve/api-key)"
