"""The storage / data-loader outputs runbook 1 reads: PSI, findmnt's JSON, ps, and the kernel's lines for storage
that stopped answering, in their real formats (the kernel's PSI documentation, util-linux, procps, the NFS client
and Lustre's messages)."""

from pathlib import Path

import pytest

from apps.parsers.errors import ParseError
from apps.parsers.storage import parse_findmnt, parse_ps, parse_psi, parse_storage_stalls

# Documentation/accounting/psi.rst's example, and a node whose NFS mount hangs.
PSI = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
FINDMNT = """{
   "filesystems": [
      {"target":"/", "source":"/dev/nvme0n1p2", "fstype":"ext4", "options":"rw,relatime",
       "children": [
          {"target":"/data", "source":"nas01:/export/data", "fstype":"nfs4",
           "options":"rw,relatime,vers=4.2,rsize=1048576,wsize=1048576,hard,proto=tcp,timeo=600,retrans=2"}
       ]}
   ]
}
"""
PS = """    PID    PPID STAT COMMAND         COMMAND
   4100       1 Ssl  torchrun        /usr/bin/python3 /usr/local/bin/torchrun --nproc-per-node 1 train.py
   4101    4100 Rl   python3         /usr/bin/python3 -u train.py
   4102    4101 D    pt_data_worker  /usr/bin/python3 -u train.py
"""
KERNEL = """[86400.1] nfs: server nas01 not responding, still trying
[86460.2] INFO: task pt_data_worker:4102 blocked for more than 122 seconds.
[86500.3] nfs: server nas02 not responding, still trying
[86600.4] nfs: server nas02 OK
[86700.5] Lustre: scratch-OST0003-osc-ffff9a1c4e8d1000: Connection to scratch-OST0003 (at 10.30.0.12@o2ib) was \
lost; in progress operations using this service will wait for recovery to complete
"""


def test_the_parsers_read_psi_findmnt_ps_and_the_kernels_storage_lines():
    stall = parse_psi(PSI)
    assert stall.some.avg10 == 0.0 and stall.full is not None and stall.full.total_us == 0
    mounts = parse_findmnt(FINDMNT)
    data = mounts.holding("/data/shard-00001.tar")
    assert (data.fstype, data.server, data.option("timeo"), data.option("hard")) == ("nfs4", "nas01", "600", "")
    assert mounts.holding("/etc/hosts").target == "/"
    processes = parse_ps(PS)
    assert [p.comm for p in processes.children(4101)] == ["pt_data_worker"] and processes.processes[2].uninterruptible
    found = parse_storage_stalls(KERNEL)
    assert found.servers == ["10.30.0.12@o2ib", "nas01"]  # nas02 answered again
    assert [s.kind for s in found.stalls] == ["nfs_not_responding", "hung_task", "lustre_connection_lost"]
    assert found.stalls[1].pid == 4102 and found.stalls[1].seconds == 122 and found.stalls[1].line == 2
    with pytest.raises(ParseError, match="some"):
        parse_psi("avg10=1\n")


DATA = Path(__file__).parent / "data"


def test_real_psi_and_ps_captures_parse():
    stall = parse_psi((DATA / "psi-io-real.txt").read_text())
    assert stall.full is not None and stall.some.total_us >= stall.full.total_us > 0
    processes = parse_ps((DATA / "ps-eo-kernel-threads-real.txt").read_text()).processes
    assert len(processes) == 11 and all(p.ppid == 2 for p in processes)
    assert processes[0].comm == "pool_workqueue_" and processes[0].args == "[pool_workqueue_release]"


def test_triage_names_storage_that_stopped_answering_citing_its_lines():
    from apps.parsers.triage import triage

    findings = [f for f in triage(KERNEL).findings if f.problem == "storage_not_responding"]
    assert findings and sorted(line for f in findings for line in f.lines) == [1, 2, 3, 5]
    assert findings[0].detail == "storage server nas01 not responding"  # the first line; the rest are cited
    assert "INFO: task pt_data_worker:4102 blocked" in " ".join(excerpt for f in findings for excerpt in f.excerpt)
