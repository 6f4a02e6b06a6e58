from .datasets import BatchFeatureDataset, VariableVideoTextDataset, VideoTextDataset
from .pin_memory_cache import PinMemoryCache
from .sampler import DistributedSampler, VariableVideoBatchSampler


