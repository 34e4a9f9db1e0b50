"""A graph attention network in the style of PyTorch's gat example: multi-head attention
over a graph's edges with LeakyReLU scores, masked softmax over each node's neighbours, ELU,
dropout, log-softmax and NLL loss on the labelled nodes, Adam with weight decay. The graph is a
synthetic two-community graph made here.

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = int(os.environ.get("PORT_STEPS", "30"))
DROPOUT = float(os.environ.get("PORT_DROPOUT", "0.3"))


def sync_init(model, name="model"):
    """The same initial weights in both libraries (bench/bench_ports.py)."""
    save, load = os.environ.get("PORT_SAVE_INIT"), os.environ.get("PORT_LOAD_INIT")
    if save:
        np.savez(f"{save}.{name}.npz", **{k: v.detach().cpu().numpy()
                                          for k, v in model.state_dict().items()})
    if load:
        with np.load(f"{load}.{name}.npz") as f:
            model.load_state_dict({k: torch.tensor(f[k]) for k in f.files})


class GraphAttentionLayer(nn.Module):
    def __init__(self, in_features, out_features, n_heads, concat=True, dropout=0.4,
                 leaky_relu_slope=0.2):
        super().__init__()
        self.n_heads, self.concat, self.dropout = n_heads, concat, dropout
        self.n_hidden = out_features // n_heads if concat else out_features
        self.W = nn.Parameter(torch.empty(size=(in_features, self.n_hidden * n_heads)))
        self.a = nn.Parameter(torch.empty(size=(n_heads, 2 * self.n_hidden, 1)))
        self.leakyrelu = nn.LeakyReLU(leaky_relu_slope)
        self.softmax = nn.Softmax(dim=1)
        nn.init.xavier_normal_(self.W)
        nn.init.xavier_normal_(self.a)

    def _get_attention_scores(self, h_transformed):
        source_scores = torch.matmul(h_transformed, self.a[:, :self.n_hidden, :])
        target_scores = torch.matmul(h_transformed, self.a[:, self.n_hidden:, :])
        e = source_scores + target_scores.mT
        return self.leakyrelu(e)

    def forward(self, h, adj_mat):
        n_nodes = h.shape[0]
        h_transformed = torch.mm(h, self.W)
        h_transformed = F.dropout(h_transformed, self.dropout, training=self.training)
        h_transformed = h_transformed.view(n_nodes, self.n_heads, self.n_hidden).permute(1, 0, 2)
        e = self._get_attention_scores(h_transformed)
        connectivity_mask = -9e16 * torch.ones_like(e)
        e = torch.where(adj_mat > 0, e, connectivity_mask)
        attention = F.softmax(e, dim=-1)
        attention = F.dropout(attention, self.dropout, training=self.training)
        h_prime = torch.matmul(attention, h_transformed)
        if self.concat:
            return h_prime.permute(1, 0, 2).contiguous().view(n_nodes, -1)
        return h_prime.mean(dim=0)


class GAT(nn.Module):
    def __init__(self, in_features, n_hidden, n_heads, num_classes, dropout=0.4):
        super().__init__()
        self.gat1 = GraphAttentionLayer(in_features, n_hidden, n_heads, concat=True,
                                        dropout=dropout)
        self.gat2 = GraphAttentionLayer(n_hidden, num_classes, 1, concat=False,
                                        dropout=dropout)

    def forward(self, input_tensor, adj_mat):
        x = F.elu(self.gat1(input_tensor, adj_mat))
        return F.log_softmax(self.gat2(x, adj_mat), dim=1)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(10)
    n, f = 60, 12
    labels = np.repeat([0, 1, 2], n // 3)
    p_in, p_out = 0.3, 0.02
    prob = np.where(labels[:, None] == labels[None, :], p_in, p_out)
    adj = (rng.random((n, n)) < prob).astype(np.float32)
    adj = np.maximum(adj, adj.T)
    np.fill_diagonal(adj, 1.0)
    features = (rng.standard_normal((n, f)) + labels[:, None] * 0.3).astype(np.float32)
    x, a = torch.tensor(features), torch.tensor(adj)
    y = torch.tensor(labels, dtype=torch.long)
    idx_train = torch.tensor(rng.permutation(n)[:30], dtype=torch.long)
    model = GAT(f, 16, 4, 3, dropout=DROPOUT)
    sync_init(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=5e-4)
    criterion = nn.NLLLoss()
    for step in range(STEPS):
        model.train()
        optimizer.zero_grad()
        out = model(x, a)
        loss = criterion(out[idx_train], y[idx_train])
        loss.backward()
        optimizer.step()
        print(f"loss {step} {loss.item():.10f}")
    model.eval()
    with torch.no_grad():
        acc = (model(x, a).argmax(dim=1) == y).float().mean().item()
    print(f"accuracy {acc:.4f}")


if __name__ == "__main__":
    main()
