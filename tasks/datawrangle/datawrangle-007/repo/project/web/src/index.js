// Front-end bootstrap.
import { fetchItems } from "./api";

const API_URL = "https://api.example.com/v1"; // TODO(jo): read from env
const state = { items: [], page: 1 };

/* FIXME: the spinner never hides on error */
async function render() {
  const items = await fetchItems(state.page);
  state.items = items; /* TODO(jo): paginate properly */
  document.title = "TODO app"; // not a marker outside the comment
}

/*
 * TODO(sam): keyboard navigation
 * plain comment line
 *   FIXME(sam): focus ring is invisible in dark mode
 */
render();
