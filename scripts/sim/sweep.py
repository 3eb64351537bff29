"""The sweep (placeholder until written)."""


def model_params(cfg, record_bytes, cpu_rate, ios_per_record=1.0):
    header = 8 + 4 + 1  # index, label, valid per sample in the message header
    return {"record_bytes": record_bytes, "decoded_bytes": cfg["image_size"] ** 2 * 3 + header,
            "cpu_rate": cpu_rate, "ios_per_record": ios_per_record}


def add_flags(p, ddpio, workdir):
    pass


def main(args, make_cluster):
    raise NotImplementedError
