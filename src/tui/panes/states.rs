//! Each pane's own state, one field a pane, named by its module (`ui.panes.messages`),
//! declared from the list of panes: a pane with state of its own names its type on its
//! line (`with …`), and the dashboard's state holds it from then on.

use crate::tui::pane_kinds::pane_list;

macro_rules! declare_states {
    ($(
        $(#[$doc:meta])*
        $variant:ident $name:literal $focus:ident => $module:ident::$component:ident with $($state:ident)::+,
    )+) => {
        /// The panes' own states.
        #[derive(Debug, Clone, Default)]
        pub struct PaneStates {
            $( pub $module: super::$($state)::+, )+
        }
    };
}

pane_list!(declare_states);
