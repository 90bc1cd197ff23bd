export interface Item { sku: string; name: string; qty: number }

// TODO: retry with exponential backoff
export async function fetchItems(page: number): Promise<Item[]> {
  const res = await fetch(`/api/items?page=${page}`); //FIXME(jo):handle 429
  return res.json();
}
