"""A fake NVML provider with pynvml's API, for tests. It is passed to
:func:`preflight.probes.nvml.collect`; nothing in the product is patched."""


class NVMLError(Exception):
    def __init__(self, value):
        super().__init__("NVML error %d" % value)
        self.value = value


class _Mem:
    def __init__(self, total_mib, used_mib):
        self.total = total_mib << 20
        self.used = used_mib << 20


class _Pci:
    def __init__(self, bus):
        self.busId = bus.encode()


class FakeNvml:
    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_GPU_IS_LOST = 15
    NVML_P2P_STATUS_OK = 0
    NVML_P2P_CAPS_INDEX_READ = 0
    NVML_NVLINK_MAX_LINKS = 18
    NVMLError = NVMLError

    def __init__(self, gpus=(), driver="580.159.04", cuda=13000, init_error=None, p2p_ok=True, lost=(), ancestor=0):
        """gpus: dicts with name, cc (tuple), total/used MiB and optional health fields; ancestor:
        NVML's common-ancestor level of every pair (0 same board, 30 host bridge: topo -m's PHB)."""
        self.gpus = [dict(g) for g in gpus]
        self.driver = driver
        self.cuda = cuda
        self.init_error = init_error
        self.p2p_ok = p2p_ok
        self.lost = set(lost)
        self.ancestor = ancestor

    def nvmlInit(self):
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self):
        return self.cuda

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        if i in self.lost:
            raise NVMLError(self.NVML_ERROR_GPU_IS_LOST)
        return i

    def _g(self, h):
        return self.gpus[h]

    def nvmlDeviceGetName(self, h):
        return self._g(h)["name"]

    def nvmlDeviceGetUUID(self, h):
        return "GPU-%04d" % h

    def nvmlDeviceGetPciInfo(self, h):
        return _Pci("0000:%02x:00.0" % (h + 0x18))

    def nvmlDeviceGetMemoryInfo(self, h):
        g = self._g(h)
        return _Mem(g.get("total", 143771), g.get("used", 0))

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return self._g(h).get("cc", (9, 0))

    def nvmlDeviceGetEccMode(self, h):
        return (1, 1)

    def nvmlDeviceGetTotalEccErrors(self, h, kind, counter):
        return self._g(h).get("ecc_uncorrected", 0)

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h):
        return 0

    def nvmlDeviceGetRemappedRows(self, h):
        return (0, 0, 1 if self._g(h).get("remap_pending") else 0, 0)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return self._g(h).get("throttle", 0)

    def nvmlDeviceGetPersistenceMode(self, h):
        return 1

    def nvmlDeviceGetMigMode(self, h):
        return (1 if self._g(h).get("mig") else 0, 0)

    def nvmlDeviceGetComputeMode(self, h):
        return self._g(h).get("compute_mode", 0)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self._g(h).get("width", 16)

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetNvLinkState(self, h, link):
        if link >= self._g(h).get("nvlinks", 0):
            raise NVMLError(3)
        return 1

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h, link):
        """``nvlink_to``: "switch" (every link to an NVSwitch) or a list of peer GPU indices, one
        per link; without it NVML answers 'not supported' (3), as old drivers do."""
        to = self._g(h).get("nvlink_to")
        if to is None:
            raise NVMLError(3)
        return 2 if to == "switch" else 0

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h, link):
        to = self._g(h).get("nvlink_to")
        if not isinstance(to, list) or link >= len(to):
            raise NVMLError(3)
        return _Pci("00000000:%02x:00.0" % (to[link] + 0x18))

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return []

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return self.ancestor

    def nvmlDeviceGetP2PStatus(self, a, b, idx):
        return 0 if self.p2p_ok else 2


def h200s(n=2, **kw):
    return [dict({"name": "NVIDIA H200", "cc": (9, 0), "nvlinks": 18}, **kw) for _ in range(n)]
