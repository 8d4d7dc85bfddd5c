W=fixtures/workloads/host_timing.py
for i in 1 2 3; do echo "alone $(timeout 60 python3 tests/support/fresh_timing.py $W::churn cuda 385)"; done
python3 -c "import torch, time; torch.zeros(1, device='cuda'); time.sleep(80)" & P=$!
sleep 8
for i in 1 2 3; do echo "beside another context $(timeout 60 python3 tests/support/fresh_timing.py $W::churn cuda 385)"; done
kill $P
